package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/rpcerror"
)

// ServeLines serves one caller over MCP's stdio framing — one JSON-RPC
// message per line — read from in and answered on out, until in ends or
// ctx does; check as RunChecked asks it. ServeStdio serves it on this
// process's stdin and stdout.
//
// A line is read within http.max_body_bytes and never buffered past it: a
// longer one is answered X_MCP_BODY_TOO_LARGE (with its id when the part
// read holds it) and skipped to its end; a line that is not JSON is
// answered -32700, one that is a batch or no JSON-RPC message -32600, a
// request whose params the SDK would not read -32602 (paramsProblem, as
// over HTTP) — and the session serves the next line, where go-sdk's own
// stdio transport ends it.
//
// When ctx ends (serve told to stop, SIGTERM), the session stops reading
// and answers the calls it read first, as at the end of the input, then
// returns ctx's error: serve over HTTP drains its calls in flight, and
// closing the session at once wrote none of their answers (the SDK's
// Close drops every write), an action that ran never reported to its
// caller.
func (s *Server) ServeLines(ctx context.Context, caller *engine.Caller, check func(context.Context) error, in io.ReadCloser, out io.Writer) error {
	t := &lineTransport{in: in, out: out, max: s.maxBodyBytes(), caps: s.capabilities(true), log: s.log, stop: ctx.Done()}
	err := s.RunChecked(context.WithoutCancel(ctx), caller, check, t)
	if ctx.Err() != nil && (err == nil || errors.Is(err, io.EOF)) {
		return ctx.Err()
	}
	return err
}

// lineTransport is the transport ServeLines serves.
type lineTransport struct {
	in   io.ReadCloser
	out  io.Writer
	max  int64
	caps *sdk.ServerCapabilities // the session's, for unservedMethod
	log  *slog.Logger
	// stop, once closed, ends the input as its end would: the calls read
	// are answered, no line after is served.
	stop <-chan struct{}
}

// Connect implements sdk.Transport.
func (t *lineTransport) Connect(context.Context) (sdk.Connection, error) {
	c := &lineConn{in: t.in, out: t.out, log: t.log, incoming: make(chan lineRead), closed: make(chan struct{}),
		calls: map[jsonrpc.ID]bool{}, answered: make(chan struct{}, 1)}
	// A goroutine reads, so that Close unblocks a Read waiting for input
	// (as go-sdk's own transports do); it stays blocked in a read of in
	// that Close does not end, as theirs does.
	go c.readLoop(bufio.NewReaderSize(t.in, 64<<10), t.max, t.caps)
	if t.stop != nil {
		go func() {
			select {
			case <-t.stop:
				c.callsMu.Lock()
				c.stopping = true
				c.callsMu.Unlock()
				c.drain()
				c.deliver(lineRead{err: io.EOF})
			case <-c.closed:
			}
		}()
	}
	return c, nil
}

type lineRead struct {
	msg jsonrpc.Message
	err error
}

// lineConn is one stdio session's connection. Write and Close are safe
// for concurrent use; Close may be called more than once.
type lineConn struct {
	in       io.Closer
	out      io.Writer
	log      *slog.Logger
	writeMu  sync.Mutex
	incoming chan lineRead
	once     sync.Once
	closed   chan struct{}

	// The calls read and not answered yet, by id, and a signal each time
	// one is: the end of the input waits for them (drain).
	callsMu  sync.Mutex
	calls    map[jsonrpc.ID]bool
	answered chan struct{}
	// stopping is set once the transport's stop closed: no line read
	// after it is served.
	stopping bool
}

// drainBound bounds how long the end of the input waits for the calls
// read before it to be answered: every call is answered (the SDK answers
// a cancelled one too), within the engine's transaction and upstream
// bounds; this only keeps a call that never ends from holding the process
// for ever once its client has gone.
const drainBound = 2 * time.Minute

// Read implements sdk.Connection.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case r := <-c.incoming:
		return r.msg, r.err
	}
}

// Write implements sdk.Connection.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, isResponse := msg.(*jsonrpc.Response)
	var data []byte
	var err error
	if answer := c.answer(resp); answer != nil {
		data, err = json.Marshal(answer)
	} else {
		data, err = jsonrpc.EncodeMessage(msg)
	}
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	err = c.writeLine(data)
	if isResponse {
		c.done(resp.ID)
	}
	return err
}

// answer is what the client is sent for r, an answer the SDK wrote with
// an error without the data every refusal carries, or nil when r is sent
// as it is. An error of the SDK's own with no JSON-RPC code (it writes 0,
// which JSON-RPC gives no meaning) is coded; one with a code but no
// stable code in its data (a request of protocol 2026-07-28 whose
// params._meta lacks what that version asks, or names a version the
// server does not serve, which the SDK refuses before any handler sees
// it) is given it as HTTP gives it (withCode).
func (c *lineConn) answer(r *jsonrpc.Response) *rpcerror.Response {
	if r == nil || r.Error == nil {
		return nil
	}
	var wire *jsonrpc.Error
	if !errors.As(r.Error, &wire) || wire.Code == 0 {
		return c.coded(r)
	}
	coded, _ := withCode(rawID(r), wire.Code, wire.Message, wire.Data)
	return coded
}

// rawID is r's id as JSON, or nil when it has none.
func rawID(r *jsonrpc.Response) json.RawMessage {
	id, err := json.Marshal(r.ID.Raw())
	if err != nil || !r.ID.IsValid() {
		return nil
	}
	return id
}

// sessionOrder holds what the SDK's errors say of a request out of the
// session's order: one before the initialize handshake ended, a second
// initialize.
var sessionOrder = []string{"during session initialization", `duplicate "initialize"`, `duplicate "notifications/initialized"`}

// coded is the answer to r, uncoded: a request out of the session's
// order is the client's invalid request (-32600 X_MCP_INVALID_REQUEST,
// the SDK's words kept); any other error is an internal one, its text
// for the host log only, as HTTP answers a failure of the SDK's.
func (c *lineConn) coded(r *jsonrpc.Response) *rpcerror.Response {
	id := rawID(r)
	text := r.Error.Error()
	for _, s := range sessionOrder {
		if strings.Contains(text, s) {
			return rpcerror.New(id, rpcerror.CodeInvalidRequest, errcode.MCPInvalidRequest, text+": send initialize once, then notifications/initialized, before any other request", 0)
		}
	}
	return sdkFailed(context.Background(), c.log, id, text)
}

// admit reports whether a line just read is served (none is once the
// session was told to stop) and, for a call's (id set), whether it was
// claimed: counted under the same lock the stop is set under, so the
// stop's drain never misses a call admitted before it.
func (c *lineConn) admit(id *jsonrpc.ID) (admitted, claimed bool) {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	if c.stopping {
		return false, false
	}
	if id == nil || c.calls[*id] {
		return true, false
	}
	c.calls[*id] = true
	return true, true
}

// done counts the call under id answered, signalling it.
func (c *lineConn) done(id jsonrpc.ID) {
	c.callsMu.Lock()
	delete(c.calls, id)
	c.callsMu.Unlock()
	select {
	case c.answered <- struct{}{}:
	default:
	}
}

// drain waits, at most drainBound, until every call read has been
// answered, or the connection closed. The SDK cancels every call still
// running once Read ends, and writes no answer after: a client that sends
// its calls and closes its end (a pipe, as the specification's shutdown
// has it) would not learn what they did — an action may have run.
func (c *lineConn) drain() {
	bound := time.NewTimer(drainBound)
	defer bound.Stop()
	for {
		c.callsMu.Lock()
		open := len(c.calls)
		c.callsMu.Unlock()
		if open == 0 {
			return
		}
		select {
		case <-c.answered:
		case <-c.closed:
			return
		case <-bound.C:
			c.log.Warn("stdio input ended with calls unanswered past the bound; they are cancelled", "calls", open, "bound", drainBound.String())
			return
		}
	}
}

// writeLine writes one message and its newline in one write, so that
// answers written by the reader and by the session never interleave.
func (c *lineConn) writeLine(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.out.Write(append(data, '\n'))
	return err
}

// Close implements sdk.Connection.
func (c *lineConn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.closed)
		err = c.in.Close()
	})
	return err
}

// SessionID implements sdk.Connection.
func (c *lineConn) SessionID() string { return "" }

// readLoop reads lines until in ends, handing each message to Read and
// answering each line that is none itself.
func (c *lineConn) readLoop(r *bufio.Reader, limit int64, caps *sdk.ServerCapabilities) {
	for {
		line, tooLong, err := readLine(r, limit)
		msg, answer := judgeLine(line, tooLong, limit, caps)
		var id *jsonrpc.ID // a call's, counted in flight until answered
		if req, ok := msg.(*jsonrpc.Request); answer == nil && ok && req.IsCall() {
			id = &req.ID
		}
		admitted, claimed := c.admit(id)
		if !admitted {
			c.log.Warn("stdio input read after the stop is not served")
			return
		}
		if id != nil && !claimed {
			// Two calls in flight under one id: the SDK answers one of
			// them, and the other waited for an answer never written.
			raw, _ := json.Marshal(id.Raw())
			answer = rpcerror.New(raw, rpcerror.CodeInvalidRequest, errcode.MCPInvalidRequest,
				"a call under this id is still running: each call in flight needs an id of its own", 0)
		}
		switch {
		case answer != nil:
			c.log.Warn("stdio message refused", "code", string(answer.Error.Data.Code), "reason", answer.Error.Message)
			data, _ := json.Marshal(answer)
			if werr := c.writeLine(data); werr != nil {
				c.deliver(lineRead{err: werr})
				return
			}
		case msg != nil:
			if !c.deliver(lineRead{msg: msg}) {
				return
			}
		}
		if err != nil {
			c.drain()
			c.deliver(lineRead{err: err})
			return
		}
	}
}

// deliver hands r to Read, and reports false once the connection closed.
func (c *lineConn) deliver(r lineRead) bool {
	select {
	case c.incoming <- r:
		return true
	case <-c.closed:
		return false
	}
}

// judgeLine reads one line as a message, or returns the answer refusing
// it. A blank line is neither. caps are the session's capabilities.
func judgeLine(line []byte, tooLong bool, limit int64, caps *sdk.ServerCapabilities) (jsonrpc.Message, *rpcerror.Response) {
	if tooLong {
		return nil, rpcerror.New(rpcerror.ID(line), rpcerror.CodeServerError, errcode.MCPBodyTooLarge,
			fmt.Sprintf("the message is longer than %d bytes", limit), limit)
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, nil
	}
	env, problem := rpcerror.Inspect(line)
	if problem == nil {
		problem = repeatedMember(line, env.Params)
	}
	if problem != nil {
		return nil, problem.Response(rpcerror.ID(line))
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return nil, rpcerror.New(rpcerror.ID(line), rpcerror.CodeInvalidRequest, errcode.MCPInvalidRequest, "the message is not a JSON-RPC message the server reads", 0)
	}
	// The SDK answers a request of a method it does not serve -32601 too,
	// but without the data HTTP's answer carries; a notification of one
	// it ignores, as JSON-RPC asks.
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return msg, nil
	}
	if req.IsCall() && !standardMethod(req.Method) {
		return nil, methodUnknown(rpcerror.ID(line), noMethod(req.Method))
	}
	if problem := paramsProblem(req.Method, req.IsCall(), req.Params); problem != nil {
		return nil, problem.Response(rpcerror.ID(line))
	}
	// Params are judged first, as the SDK reads them before its handler
	// finds the method unserved.
	if why := unservedMethod(req.Method, caps); why != "" && req.IsCall() {
		return nil, methodUnknown(rpcerror.ID(line), why)
	}
	return msg, nil
}

// readLine reads one line, without its newline (LF or CRLF), keeping at
// most limit+1 bytes of it: of a longer line, it returns the first limit
// bytes, having read the rest to its end unkept, and reports it too long.
// err is the read's error (io.EOF at the end of in, with the last line if
// it had no newline).
func readLine(r *bufio.Reader, limit int64) (line []byte, tooLong bool, err error) {
	var total int64 // the line's length, its LF excluded
	var last byte
	for {
		chunk, rerr := r.ReadSlice('\n')
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		total += int64(len(chunk))
		if len(chunk) > 0 {
			last = chunk[len(chunk)-1]
		}
		if room := limit + 1 - int64(len(line)); room > 0 { // + 1: a CR the limit does not count
			line = append(line, chunk[:min(int64(len(chunk)), room)]...)
		}
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		if last == '\r' {
			total--
			line = line[:min(int64(len(line)), total)]
		}
		if total > limit {
			return line[:min(int64(len(line)), limit)], true, rerr
		}
		return line, false, rerr
	}
}
