package sluice

import (
	"encoding/json"
	"fmt"
)

// Codec turns a job payload into the bytes the journal stores and back. Decode must accept
// everything Encode produced, also in a later process: the journal outlives the program.
type Codec[A any] interface {
	Encode(payload A) ([]byte, error)
	Decode(data []byte) (A, error)
}

// JSON returns a Codec that stores payloads with encoding/json.
func JSON[A any]() Codec[A] { return jsonCodec[A]{} }

type jsonCodec[A any] struct{}

func (jsonCodec[A]) Encode(payload A) ([]byte, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("sluice: encoding payload as JSON: %w", err)
	}
	return b, nil
}

func (jsonCodec[A]) Decode(data []byte) (A, error) {
	var a A
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("sluice: decoding JSON payload: %w", err)
	}
	return a, nil
}

// Bytes returns a Codec that stores []byte payloads as they are. Decode returns a copy, so the
// handler may keep or change it.
func Bytes() Codec[[]byte] { return bytesCodec{} }

type bytesCodec struct{}

func (bytesCodec) Encode(payload []byte) ([]byte, error) { return payload, nil }

func (bytesCodec) Decode(data []byte) ([]byte, error) {
	return append([]byte(nil), data...), nil
}
