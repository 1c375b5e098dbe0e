// Package sqs is the core.Transport port on Amazon SQS through aws-sdk-go-v2 (package
// awssqs here), behind Client, a narrow interface holding only the calls the port makes.
//
// Rules:
//
//  1. Receive asks for ApproximateReceiveCount explicitly (MessageSystemAttributeNames) and
//     fails Fatal (code MissingReceiveCount) if a message comes back without it: the worker's
//     poison budget depends on it. wait is a long poll in whole seconds, capped at SQS's 20 s;
//     visibility is whole seconds, 0 meaning the queue's default.
//  2. Every call runs under the context it is given, bounded by Config.CallTimeout (a long
//     poll gets its wait on top). A cancelled context ends the call at once as Retryable: the
//     worker cuts a long poll short that way at shutdown. The transport stores no context.
//  6. New refuses a QueueURL that is not an absolute http(s) URL (a queue name or an ARN is a
//     common mistake that would otherwise fail only at the first call).
//  3. Batch calls take 1..10 entries (an empty or larger batch fails Fatal without a call, as
//     SQS would answer it and as sim/queue's Transport does). They send entry ids "0".."9"
//     and map SQS's per-entry results back to one error per entry, in entry order; an entry
//     SQS answered neither way is Retryable (code NoEntryResult).
//  4. Errors are *core.TransportError classed as docs/worker.md says (classify, table-tested):
//     - Gone: MessageNotInflight, ReceiptHandleIsInvalid, and InvalidParameterValue whose message
//     says the receipt handle expired (the message was redelivered or deleted);
//     - Retryable: throttling codes (the SDK's list, plus RequestThrottled, KmsThrottled and
//     OverLimit, which clear with time), RequestTimeout, HTTP 429 and 5xx, server-fault batch
//     entries, timeouts, a cancelled context, connection refused/reset and other connection
//     errors;
//     - Fatal: everything else (authorisation, a malformed request, a missing queue, a
//     visibility past the 12 h ceiling).
//     Codes are reported without the "AWS.SimpleQueueService." prefix the query-compatible
//     protocol adds.
//  7. Calls that name a receipt (change visibility, delete) and sends make one attempt: the
//     SDK's retryer is replaced for them (aws.NopRetryer), whatever the client was configured
//     with. The lease machine retries receipt calls with its pacing inside the receipt's
//     lease (an SDK retry could reach the queue after the machine dropped the receipt); a
//     blind resend of a message the queue may have stored would store it twice. Receives
//     keep the client's retries.
//  8. A send whose outcome is unknown fails with an error wrapping core.ErrSendUnknown
//     (Retryable): a 5xx answer, an answer that could not be read, or a connection that
//     failed once the request was on its way (a reset, a timeout), and a batch entry SQS
//     answered neither way. A 4xx answer, a failed batch entry and a connection never made
//     stored nothing and do not wrap it.
//  9. Attributes: a send carries Outgoing.Attributes as String attributes and Outgoing.Typed
//     with their own data types (a name in both, or a value of the wrong kind for its type,
//     is refused Fatal without a call); a receive fills Message.Typed with every attribute
//     and its data type (String, Number, Binary, custom suffixes) and Message.Attributes with
//     the text ones. DedupID and GroupID go out as MessageDeduplicationId and MessageGroupId
//     (FIFO queues).
//  5. The adapter keeps no state between calls and is safe for concurrent use (as the SDK
//     client is).
//
// NewClient loads configuration the SDK's normal way (config.LoadDefaultConfig) with an
// optional endpoint override; CreateQueue, CreateQueueWithDeadLetter and Send are helpers for
// tests and examples. The tests run against fauxqs (internal/fauxqs), never a mock of the SDK.
package sqs
