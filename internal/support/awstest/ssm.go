package awstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/websocket"

	"github.com/hyperpod-governance/portal/internal/slurm/slurmssm"
)

// SSM is Systems Manager's Session Manager as the portal's Slurm transport
// uses it (internal/slurm/slurmssm): StartSession and TerminateSession on
// the awsJson1_1 API (X-Amz-Target AmazonSSM.<Operation>), and the
// session's data channel, a WebSocket on a second server as ssmmessages is
// a second host, spoken the way the SSM agent speaks it (binary messages,
// handshake, sequence numbers, acknowledgements, channel_closed).
//
// A session runs the AWS-StartNonInteractiveCommand document's command the
// way the agent does on Linux: split with shell word rules and executed
// without a shell (amazon-ssm-agent, agent/session/shell/shell_unix.go,
// StartCommandExecutor), its standard output and error merged and
// "\n" written as "\r\n" as on the terminal the agent runs it on, with
// SLURM_CONF set to Conf (the test bed's Slurm).
type SSM struct {
	*Core
	conf     string
	msgs     *httptest.Server
	targets  map[string]bool // managed nodes that are connected
	sessions map[string]*ssmSession
	next     int

	channelErrors []string

	// Chunk is the most output bytes one output message carries (default
	// 1000, so that a listing spans many messages).
	Chunk int
	// Reorder sends each pair of output messages in reverse order, as
	// the service may deliver them; the client must put them back.
	Reorder bool
	// Hang keeps every session open without running its command: the
	// client's bounded wait must end it.
	Hang bool
	// RequireKMS makes the handshake ask for KMS encryption (the Session
	// Manager preference); a client that refuses it gets the session
	// closed with the agent's reason.
	RequireKMS bool
}

type ssmSession struct {
	id, target, command, token string
	opened, terminated         bool
}

// ssmDocumentName is StartSession's DocumentName pattern (SSM API
// Reference, API_StartSession.html).
var ssmDocumentName = regexp.MustCompile(`^[a-zA-Z0-9_\-.:/]{3,128}$`)

// NewSSM starts an SSM endpoint whose sessions run commands with
// SLURM_CONF=conf; closed when tb ends.
func NewSSM(tb testing.TB, conf string) *SSM {
	s := &SSM{Core: newCore(tb, "ssm", true), conf: conf, targets: map[string]bool{}, sessions: map[string]*ssmSession{}, Chunk: 1000}
	s.serveJSON11("AmazonSSM", s.ops())
	s.msgs = httptest.NewServer(websocket.Server{Handshake: s.channelHandshake, Handler: s.channel})
	tb.Cleanup(s.msgs.Close)
	return s
}

// Connect registers a managed node's target (for a HyperPod node,
// "sagemaker-cluster:<id>_<group>-<instance>") as connected.
func (s *SSM) Connect(target string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets[target] = true
}

// Set changes settings under the endpoint's lock.
func (s *SSM) Set(fn func(*SSM)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

// Commands are the commands the sessions were started with, in order.
func (s *SSM) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i := 1; i <= s.next; i++ {
		out = append(out, s.sessions[fmt.Sprintf("portal-%03d", i)].command)
	}
	return out
}

// Open is how many sessions were started and not terminated.
func (s *SSM) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, x := range s.sessions {
		if !x.terminated {
			n++
		}
	}
	return n
}

type ssmStartSessionIn struct {
	Target       *string
	DocumentName *string
	Parameters   map[string][]string
	Reason       *string
}

func (s *SSM) ops() map[string]handler {
	return map[string]handler{
		"StartSession": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in ssmStartSessionIn
			if e := decode(&in); e != nil {
				return nil, e
			}
			return s.startSession(in)
		},
		"TerminateSession": func(_ *http.Request, decode func(any) *Error) (any, *Error) {
			var in struct{ SessionId *string }
			if e := decode(&in); e != nil {
				return nil, e
			}
			if in.SessionId == nil || len(*in.SessionId) < 1 || len(*in.SessionId) > 96 {
				return nil, Validation("1 validation error detected: Value at 'sessionId' failed to satisfy constraint: Member must have length between 1 and 96")
			}
			if x, ok := s.sessions[*in.SessionId]; ok {
				x.terminated = true
			}
			// This endpoint answers an unknown or ended session's id too:
			// the transport terminates sessions the agent already ended.
			return map[string]any{"SessionId": *in.SessionId}, nil
		},
	}
}

func (s *SSM) startSession(in ssmStartSessionIn) (any, *Error) {
	switch {
	case in.Target == nil:
		return nil, Validation("1 validation error detected: Value null at 'target' failed to satisfy constraint: Member must not be null")
	case len(*in.Target) < 1 || len(*in.Target) > 400:
		return nil, Validation("Value at 'target' failed to satisfy constraint: Member must have length between 1 and 400")
	case in.DocumentName != nil && !ssmDocumentName.MatchString(*in.DocumentName):
		return nil, Validation("Value %q at 'documentName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", *in.DocumentName, ssmDocumentName)
	case in.Reason != nil && (len(*in.Reason) < 1 || len(*in.Reason) > 256):
		return nil, Validation("Value at 'reason' failed to satisfy constraint: Member must have length between 1 and 256")
	case in.DocumentName == nil || *in.DocumentName != slurmssm.Document:
		return nil, BadRequest("InvalidDocument", "this test endpoint serves only %s", slurmssm.Document)
	}
	for k := range in.Parameters {
		if k != "command" {
			return nil, BadRequest("InvalidDocument", "document %s has no parameter %q", slurmssm.Document, k)
		}
	}
	cmd := in.Parameters["command"]
	if len(cmd) != 1 || cmd[0] == "" {
		return nil, BadRequest("InvalidDocument", "document %s requires one value of parameter command", slurmssm.Document)
	}
	if !s.targets[*in.Target] {
		return nil, BadRequest("TargetNotConnected", "%s is not connected.", *in.Target)
	}
	s.next++
	x := &ssmSession{id: fmt.Sprintf("portal-%03d", s.next), target: *in.Target, command: cmd[0], token: slurmssm.NewUUID().String()}
	s.sessions[x.id] = x
	s.event("created", "session")
	return map[string]any{
		"SessionId":  x.id,
		"StreamUrl":  "ws" + strings.TrimPrefix(s.msgs.URL, "http") + "/v1/data-channel/" + x.id + "?role=publish_subscribe",
		"TokenValue": x.token,
	}, nil
}

// channelHandshake admits a WebSocket upgrade only for a started session's
// data channel URL.
func (s *SSM) channelHandshake(_ *websocket.Config, r *http.Request) error {
	id, ok := strings.CutPrefix(r.URL.Path, "/v1/data-channel/")
	if !ok || r.URL.Query().Get("role") != "publish_subscribe" {
		return fmt.Errorf("no data channel at %s", r.URL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x, known := s.sessions[id]
	if !known || x.terminated || x.opened {
		return fmt.Errorf("session %s is unknown, terminated or already open", id)
	}
	x.opened = true
	return nil
}

// frames receives frames and tells text from binary.
var frames = websocket.Codec{
	Marshal: func(v any) ([]byte, byte, error) { return v.([]byte), websocket.BinaryFrame, nil },
	Unmarshal: func(data []byte, payloadType byte, v any) error {
		f := v.(*frame)
		f.data, f.text = data, payloadType == websocket.TextFrame
		return nil
	},
}

type frame struct {
	data []byte
	text bool
}

// agentChannel is the agent's end of one session's data channel.
type agentChannel struct {
	s    *SSM
	ws   *websocket.Conn
	x    *ssmSession
	seq  int64
	sent map[string]int64 // unacknowledged output messages by id
	// inSeq is the next input sequence number the client must use.
	inSeq int64
}

func (s *SSM) channel(ws *websocket.Conn) {
	defer ws.Close()
	_ = ws.SetDeadline(time.Now().Add(2 * time.Minute))
	id := strings.TrimPrefix(ws.Request().URL.Path, "/v1/data-channel/")
	s.mu.Lock()
	x := s.sessions[id]
	s.mu.Unlock()
	a := &agentChannel{s: s, ws: ws, x: x, sent: map[string]int64{}}
	if err := a.serve(); err != nil {
		// Not through tb: the channel's goroutine may outlive the test.
		s.mu.Lock()
		s.channelErrors = append(s.channelErrors, id+": "+err.Error())
		s.mu.Unlock()
	}
}

// ChannelErrors are the protocol errors the data channels saw (a client
// that broke the protocol), by session.
func (s *SSM) ChannelErrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.channelErrors...)
}

func (a *agentChannel) serve() error {
	if err := a.open(); err != nil {
		return err
	}
	if ok, err := a.handshake(); !ok || err != nil {
		return err
	}
	a.s.mu.Lock()
	hang, chunk, reorder, conf := a.s.Hang, a.s.Chunk, a.s.Reorder, a.s.conf
	a.s.mu.Unlock()
	if hang {
		var f frame
		for frames.Receive(a.ws, &f) == nil {
		}
		return nil
	}
	out, runErr := run(a.x.command, conf)
	if runErr != "" {
		return a.close(runErr)
	}
	out = bytes.ReplaceAll(out, []byte("\n"), []byte("\r\n"))
	var msgs []slurmssm.Message
	for len(out) > 0 {
		n := min(chunk, len(out))
		msgs = append(msgs, a.output(slurmssm.PayloadOutput, out[:n]))
		out = out[n:]
	}
	for i := 0; i < len(msgs); i += 2 {
		if reorder && i+1 < len(msgs) {
			msgs[i], msgs[i+1] = msgs[i+1], msgs[i]
		}
	}
	for _, m := range msgs {
		if err := a.send(m); err != nil {
			return err
		}
	}
	if err := a.awaitAcks(); err != nil {
		return err
	}
	return a.close("")
}

// open reads the client's first frame: a text OpenDataChannelInput with
// every member present and the session's token.
func (a *agentChannel) open() error {
	var f frame
	if err := frames.Receive(a.ws, &f); err != nil {
		return err
	}
	if !f.text {
		return fmt.Errorf("first frame is binary, not the OpenDataChannelInput text")
	}
	var in slurmssm.OpenDataChannel
	dec := json.NewDecoder(bytes.NewReader(f.data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("OpenDataChannelInput: %v", err)
	}
	switch {
	case in.MessageSchemaVersion != "1.0":
		return fmt.Errorf("MessageSchemaVersion %q", in.MessageSchemaVersion)
	case len(in.RequestID) < 16 || in.ClientID == "" || in.ClientVersion == "":
		return fmt.Errorf("OpenDataChannelInput lacks RequestId (16+), ClientId or ClientVersion: %+v", in)
	case in.TokenValue != a.x.token:
		return fmt.Errorf("token does not match session %s", a.x.id)
	}
	return nil
}

// handshake asks for the session type (and KMS encryption when required),
// reads the client's response and completes the handshake; ok is false
// when the client refused an action and the session was closed.
func (a *agentChannel) handshake() (ok bool, err error) {
	actions := []map[string]any{{"ActionType": "SessionType",
		"ActionParameters": map[string]any{"SessionType": "NonInteractiveCommands", "Properties": map[string]any{}}}}
	a.s.mu.Lock()
	kms := a.s.RequireKMS
	a.s.mu.Unlock()
	if kms {
		actions = append(actions, map[string]any{"ActionType": "KMSEncryption", "ActionParameters": map[string]any{"KMSKeyId": "alias/portal-test"}})
	}
	req, _ := json.Marshal(map[string]any{"AgentVersion": "3.3.0.0", "RequestedClientActions": actions})
	if err := a.send(a.output(slurmssm.PayloadHandshake, req)); err != nil {
		return false, err
	}
	resp, err := a.receiveInput(slurmssm.PayloadHandshakeR)
	if err != nil {
		return false, err
	}
	var hr slurmssm.HandshakeResponse
	dec := json.NewDecoder(bytes.NewReader(resp))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hr); err != nil {
		return false, fmt.Errorf("HandshakeResponse: %v", err)
	}
	if len(hr.ProcessedClientActions) != len(actions) {
		return false, fmt.Errorf("HandshakeResponse answers %d of %d actions", len(hr.ProcessedClientActions), len(actions))
	}
	for _, p := range hr.ProcessedClientActions {
		if p.ActionStatus != 1 {
			return false, a.close(fmt.Sprintf("Handshake failed: %s: %s", p.ActionType, p.Error))
		}
	}
	complete, _ := json.Marshal(map[string]any{"HandshakeTimeToComplete": 1000000, "CustomerMessage": ""})
	return true, a.send(a.output(slurmssm.PayloadHandshakeC, complete))
}

func (a *agentChannel) output(payloadType uint32, payload []byte) slurmssm.Message {
	m := slurmssm.NewMessage(slurmssm.MsgOutput, a.seq, 0, payloadType, payload)
	a.seq++
	return m
}

func (a *agentChannel) send(m slurmssm.Message) error {
	if m.Type == slurmssm.MsgOutput {
		a.sent[m.ID.String()] = m.SequenceNumber
	}
	return frames.Send(a.ws, m.Encode())
}

// receiveInput reads frames until an input_stream_data of payloadType,
// taking acknowledgements on the way; it acknowledges the input.
func (a *agentChannel) receiveInput(payloadType uint32) ([]byte, error) {
	for {
		m, err := a.receive()
		if err != nil {
			return nil, err
		}
		if m.Type != slurmssm.MsgInput {
			continue
		}
		if m.PayloadType != payloadType {
			return nil, fmt.Errorf("input payload type %d, want %d", m.PayloadType, payloadType)
		}
		if m.SequenceNumber != a.inSeq {
			return nil, fmt.Errorf("input sequence number %d, want %d", m.SequenceNumber, a.inSeq)
		}
		a.inSeq++
		ack, _ := json.Marshal(slurmssm.Ack{MessageType: m.Type, MessageID: m.ID.String(), SequenceNumber: m.SequenceNumber, IsSequentialMessage: true})
		return m.Payload, a.send(slurmssm.NewMessage(slurmssm.MsgAcknowledge, 0, 3, 0, ack))
	}
}

// receive reads one binary message, checks it and records an
// acknowledgement.
func (a *agentChannel) receive() (slurmssm.Message, error) {
	var f frame
	if err := frames.Receive(a.ws, &f); err != nil {
		return slurmssm.Message{}, err
	}
	if f.text {
		return slurmssm.Message{}, fmt.Errorf("text frame after the channel opened: %q", f.data)
	}
	m, err := slurmssm.Decode(f.data)
	if err != nil {
		return m, err
	}
	switch m.Type {
	case slurmssm.MsgAcknowledge:
		var ack slurmssm.Ack
		dec := json.NewDecoder(bytes.NewReader(m.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ack); err != nil {
			return m, fmt.Errorf("acknowledge payload: %v", err)
		}
		seq, ok := a.sent[ack.MessageID]
		if !ok || seq != ack.SequenceNumber || ack.MessageType != slurmssm.MsgOutput {
			return m, fmt.Errorf("acknowledgement of a message not sent or not waiting: %+v", ack)
		}
		delete(a.sent, ack.MessageID)
	case slurmssm.MsgInput:
		if m.PayloadType == slurmssm.PayloadSize {
			// The terminal size a client sends after the handshake:
			// {"cols": n, "rows": n}, acknowledged like any input.
			var size struct{ Cols, Rows *uint32 }
			dec := json.NewDecoder(bytes.NewReader(m.Payload))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&size); err != nil || size.Cols == nil || size.Rows == nil {
				return m, fmt.Errorf("size payload %q is not {\"cols\", \"rows\"}: %v", m.Payload, err)
			}
			if m.SequenceNumber != a.inSeq {
				return m, fmt.Errorf("input sequence number %d, want %d", m.SequenceNumber, a.inSeq)
			}
			a.inSeq++
			ack, _ := json.Marshal(slurmssm.Ack{MessageType: m.Type, MessageID: m.ID.String(), SequenceNumber: m.SequenceNumber, IsSequentialMessage: true})
			return m, a.send(slurmssm.NewMessage(slurmssm.MsgAcknowledge, 0, 3, 0, ack))
		}
	default:
		return m, fmt.Errorf("client sent message type %q", m.Type)
	}
	return m, nil
}

// awaitAcks reads until every output message is acknowledged.
func (a *agentChannel) awaitAcks() error {
	_ = a.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(a.sent) > 0 {
		if _, err := a.receive(); err != nil {
			return fmt.Errorf("%d output messages never acknowledged: %v", len(a.sent), err)
		}
	}
	return nil
}

// close sends channel_closed with reason as its Output and ends the
// session, as the agent does when the command exits.
func (a *agentChannel) close(reason string) error {
	payload, _ := json.Marshal(slurmssm.ChannelClosed{MessageID: slurmssm.NewUUID().String(), CreatedDate: time.Now().UTC().Format(time.RFC3339),
		DestinationID: a.x.target, SessionID: a.x.id, MessageType: slurmssm.MsgChannelClosed, SchemaVersion: 1, Output: reason})
	err := frames.Send(a.ws, slurmssm.NewMessage(slurmssm.MsgChannelClosed, 0, 0, 0, payload).Encode())
	a.s.mu.Lock()
	a.x.terminated = true
	a.s.mu.Unlock()
	return err
}

// run executes command as the agent does for a non-interactive session;
// a command that cannot start is the reason the session closes.
func run(command, conf string) ([]byte, string) {
	argv, err := shlexSplit(command)
	if err != nil || len(argv) == 0 {
		return nil, fmt.Sprintf("Failed to parse commands input: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err.Error()
	}
	_ = cmd.Wait() // the exit status is not on the channel: the command prints it if it wants it known
	return out.Bytes(), ""
}

// shlexSplit splits s into words with POSIX shell quoting, as the agent's
// shlex does: whitespace separates words; a backslash outside quotes
// escapes the next character; single quotes keep everything; inside double
// quotes a backslash escapes only \, ", $ and `.
func shlexSplit(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
			i += n
			continue
		case r == '\\':
			if i+n >= len(s) {
				return nil, fmt.Errorf("EOF after escape character")
			}
			r2, n2 := utf8.DecodeRuneInString(s[i+n:])
			cur.WriteRune(r2)
			i += n + n2
		case r == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("EOF found when expecting closing quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case r == '"':
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf("EOF found when expecting closing quote")
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`\"$`+"`", s[i+1]) >= 0 {
					cur.WriteByte(s[i+1])
					i += 2
					continue
				}
				cur.WriteByte(s[i])
				i++
			}
		default:
			cur.WriteRune(r)
			i += n
		}
		inWord = true
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
