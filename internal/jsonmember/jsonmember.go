// Package jsonmember reads the members of a JSON object one at a time, in
// the order they were sent, each value raw and undecoded: for the places
// that must see an object as it came — a member given twice, a member
// taken out with the rest kept byte for byte, a member read from a body
// cut short — where decoding into a map or a struct would keep one of two
// members, reorder them, or need the whole.
package jsonmember

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Scanner reads the members of one JSON object. Scan advances to each
// member in turn; once it returns false, Whole and Err say why.
type Scanner struct {
	dec    *json.Decoder
	object bool
	name   string
	value  json.RawMessage
	closed bool
	err    error
}

// New returns a Scanner of data, which should begin with a JSON object:
// when it does not, Scan returns false at once and IsObject false.
func New(data []byte) *Scanner {
	s := &Scanner{dec: json.NewDecoder(bytes.NewReader(data))}
	tok, err := s.dec.Token()
	s.object = err == nil && tok == json.Delim('{')
	if !s.object {
		s.err = errors.New("not a JSON object")
	}
	return s
}

// IsObject reports whether the data began with a JSON object.
func (s *Scanner) IsObject() bool { return s.object }

// Scan reads the next member, reporting whether there was one: false at
// the object's end, and at the first thing that is not JSON (Err).
func (s *Scanner) Scan() bool {
	if s.err != nil || s.closed {
		return false
	}
	if !s.dec.More() {
		tok, err := s.dec.Token()
		if s.closed = err == nil && tok == json.Delim('}'); !s.closed {
			s.err = errors.New("the object does not end")
		}
		return false
	}
	key, err := s.dec.Token()
	name, ok := key.(string)
	var value json.RawMessage
	if err != nil || !ok || s.dec.Decode(&value) != nil {
		s.err = errors.New("a member is not JSON")
		return false
	}
	s.name, s.value = name, value
	return true
}

// Name is the name of the member Scan read.
func (s *Scanner) Name() string { return s.name }

// Value is the value of the member Scan read, as sent (the Scanner's
// own copy, valid after the next Scan).
func (s *Scanner) Value() json.RawMessage { return s.value }

// Offset is how many bytes of the data the Scanner has read: just past
// the value of the member Scan read.
func (s *Scanner) Offset() int64 { return s.dec.InputOffset() }

// Whole reports, once Scan returned false, whether the data was one JSON
// object and nothing else: it ended, and only white space follows it.
func (s *Scanner) Whole() bool {
	if !s.closed {
		return false
	}
	_, err := s.dec.Token()
	return err == io.EOF
}

// Err is what stopped Scan before the object ended; nil when it ended.
func (s *Scanner) Err() error { return s.err }
