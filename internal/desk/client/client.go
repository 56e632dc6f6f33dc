// Package client calls the decision API (/api/v1) as a person, with the
// bearer token that person signed in for: the command line decides
// through the same door, the same checks and the same audit as the desk.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orangerail/orangerail/internal/desk/api"
	"github.com/orangerail/orangerail/internal/errcode"
)

// MaxAnswerBytes bounds an answer the client reads.
const MaxAnswerBytes = 4 << 20

// Client is one person's session with a deployment's API. It is safe for
// concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client of the deployment at server (its http.public_url)
// sending token.
func New(server, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(server, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, errcode.New(errcode.RequestInvalid, fmt.Sprintf("--server %q is not the deployment's address (http.public_url, e.g. https://orangerail.example.com)", server), nil)
	}
	if token == "" {
		return nil, errcode.New(errcode.MCPUnauthorized, "no token: run `orangerail login`, or set ORANGERAIL_TOKEN", nil)
	}
	return &Client{base: u, token: token, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// ListQuery selects approvals; empty fields select all (status: pending).
type ListQuery struct {
	Status, Action, RequestedBy, Cursor string
	Limit                               int
}

// List returns one page of the caller's tenant's approvals.
func (c *Client) List(ctx context.Context, q ListQuery) (*api.List, error) {
	v := url.Values{}
	for k, s := range map[string]string{"status": q.Status, "action": q.Action, "requested_by": q.RequestedBy, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out api.List
	return &out, c.do(ctx, http.MethodGet, "/api/v1/approvals?"+v.Encode(), nil, &out)
}

// Show returns one approval as its approver reviews it.
func (c *Client) Show(ctx context.Context, id string) (*api.Detail, error) {
	var out api.Detail
	return &out, c.do(ctx, http.MethodGet, "/api/v1/approvals/"+url.PathEscape(id), nil, &out)
}

// Decide records the caller's decision on an approval.
func (c *Client) Decide(ctx context.Context, id string, d api.DecisionRequest) (*api.DecisionResult, error) {
	var out api.DecisionResult
	return &out, c.do(ctx, http.MethodPost, "/api/v1/approvals/"+url.PathEscape(id)+"/decision", d, &out)
}

// apiError is the API's error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Fix     string `json:"fix"`
	} `json:"error"`
}

// do sends one request and decodes a 2xx answer into out; any other answer
// is an *errcode.Error carrying the API's code and message.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("reach %s: %w", c.base.Host, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes))
	if err != nil {
		return fmt.Errorf("read the answer of %s: %w", c.base.Host, err)
	}
	if resp.StatusCode/100 != 2 {
		var e apiError
		if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
			return errcode.New(errcode.Code(e.Error.Code), e.Error.Message, nil)
		}
		return fmt.Errorf("%s %s answered %s", method, path, resp.Status)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return errors.Join(fmt.Errorf("%s %s answered what is not its JSON", method, path), err)
	}
	return nil
}
