package main

import (
	"context"
	"testing"
)

// TestBuildsTheWorker builds the client, transport and worker of README's SQS snippet with an
// endpoint and static credentials, without calling the queue.
func TestBuildsTheWorker(t *testing.T) {
	t.Setenv("SQS_ACCESS_KEY_ID", "test")
	t.Setenv("SQS_SECRET_ACCESS_KEY", "test")
	if err := run(context.Background(), "http://127.0.0.1:4566/000000000000/jobs", "http://127.0.0.1:4566", "us-east-1", false); err != nil {
		t.Fatal(err)
	}
}
