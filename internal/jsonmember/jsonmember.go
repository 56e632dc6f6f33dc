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
	"strconv"
	"unicode/utf8"
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

// Repeated returns where the first member of data, at any depth, is named
// as a member its object already holds — the names and array indexes (in
// decimal) leading to the object, outermost first, then the repeated name
// — and whether there is one. A decoder into a map or a struct keeps one
// of the two, where a log, a proxy or an audit record may read the other.
// Data that is not JSON has none up to where it stops being JSON: its
// parser, not Repeated, says what is wrong with it.
//
// Every tool call's arguments pass here, so the common case — small
// objects whose names hold no escape — is read from the bytes with no
// allocation; a name with an escape (which may spell another's name), or
// one not UTF-8 (which a decoder reads as another's), or an object past
// maxCompared members, is read by repeatedByDecoder.
func Repeated(data []byte) ([]string, bool) {
	// frame is a container being read: an object, whose names begin at
	// start in names and whose member key is being read, or an array,
	// whose element index is.
	type frame struct {
		object bool
		start  int
		key    []byte
		index  int
	}
	var (
		frameBuf [16]frame
		nameBuf  [64][]byte
	)
	frames, names := frameBuf[:0], nameBuf[:0]
	const (
		wantValue = iota
		wantName  // after an object's { or ,
		wantNext  // after a value: a comma or the container's end
	)
	state, i := wantValue, 0
	for {
		for i < len(data) && isSpace(data[i]) {
			i++
		}
		if i == len(data) {
			return nil, false
		}
		c := data[i]
		switch state {
		case wantName:
			top := &frames[len(frames)-1]
			if c == '}' {
				state = wantNext // an empty object: closed below
				continue
			}
			end, escaped := stringEnd(data, i)
			switch {
			case end < 0:
				return nil, false
			case escaped || len(names)-top.start >= maxCompared:
				return repeatedByDecoder(data)
			}
			name := data[i+1 : end-1]
			if !utf8.Valid(name) {
				// A decoder reads each invalid byte as U+FFFD: two names
				// whose bytes differ may be one name to it.
				return repeatedByDecoder(data)
			}
			for _, seen := range names[top.start:] {
				if bytes.Equal(seen, name) {
					path := make([]string, 0, len(frames))
					for _, f := range frames[:len(frames)-1] {
						if f.object {
							path = append(path, string(f.key))
						} else {
							path = append(path, strconv.Itoa(f.index))
						}
					}
					return append(path, string(name)), true
				}
			}
			names, top.key = append(names, name), name
			for i = end; i < len(data) && isSpace(data[i]); i++ {
			}
			if i == len(data) || data[i] != ':' {
				return nil, false
			}
			i++
			state = wantValue
		case wantValue:
			switch {
			case c == '{':
				frames = append(frames, frame{object: true, start: len(names)})
				i++
				state = wantName
				continue
			case c == '[':
				frames = append(frames, frame{})
				i++
				continue
			case c == ']' && len(frames) > 0 && !frames[len(frames)-1].object:
				state = wantNext // an empty array: closed below
				continue
			case c == '"':
				if i, _ = stringEnd(data, i); i < 0 {
					return nil, false
				}
			default: // a number, true, false or null: up to what ends it
				for i < len(data) && !isSpace(data[i]) && data[i] != ',' && data[i] != ']' && data[i] != '}' {
					i++
				}
			}
			state = wantNext
		case wantNext:
			if len(frames) == 0 {
				return nil, false // the root value ended, and data with it
			}
			top := &frames[len(frames)-1]
			switch {
			case c == ',' && top.object:
				state = wantName
			case c == ',':
				top.index++
				state = wantValue
			case c == '}' && top.object, c == ']' && !top.object:
				if top.object {
					names = names[:top.start]
				}
				frames = frames[:len(frames)-1]
			default:
				return nil, false
			}
			i++
		}
	}
}

// maxCompared bounds the names of one object Repeated compares each name
// with, byte for byte; past it, a map compares them.
const maxCompared = 32

// stringEnd returns the index just past the JSON string data[i:] begins
// with, and whether it holds an escape; -1 when it does not end.
func stringEnd(data []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, escaped
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// repeatedByDecoder is Repeated read with encoding/json's tokens: names
// decoded (escapes and all), each object's in a map.
func repeatedByDecoder(data []byte) ([]string, bool) {
	// frame is a container being read: an object (names non-nil) whose
	// member seg is being read, or an array whose element index is.
	type frame struct {
		names   map[string]bool
		seg     string
		index   int
		wantKey bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.names != nil && top.wantKey && tok != json.Delim('}') {
			name, _ := tok.(string) // the decoder reads a name where one is due, or errs
			if top.names[name] {
				path := make([]string, 0, len(stack))
				for _, f := range stack[:len(stack)-1] {
					if f.names != nil {
						path = append(path, f.seg)
					} else {
						path = append(path, strconv.Itoa(f.index))
					}
				}
				return append(path, name), true
			}
			top.names[name], top.seg, top.wantKey = true, name, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{names: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: the container holding it reads its next member
		// or element; the root ended, and data with it.
		if len(stack) == 0 {
			return nil, false
		}
		if parent := stack[len(stack)-1]; parent.names != nil {
			parent.wantKey = true
		} else {
			parent.index++
		}
	}
}
