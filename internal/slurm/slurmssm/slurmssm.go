// Package slurmssm is the portal's transport to a HyperPod Slurm cluster's
// controller node: a slurm.Runner that runs each Slurm command there through
// AWS Systems Manager Session Manager.
//
// Why Session Manager, and not Run Command or slurmrestd:
//   - AWS documents one way in to a HyperPod Slurm node from outside the
//     cluster: a Session Manager session whose target is
//     "sagemaker-cluster:<cluster-id>_<instance-group-name>-<instance-id>",
//     with the cluster id, group and instance id taken from DescribeCluster
//     and ListClusterNodes; it runs as root
//     (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-run-jobs-slurm-access-nodes.html).
//   - Run Command cannot reach that target: SendCommand's InstanceIds and
//     GetCommandInvocation's InstanceId take only "i-…" and "mi-…" ids
//     (the SSM API model's InstanceId pattern
//     (^i-(\w{8}|\w{17})$)|(^mi-\w{17}$)), and AWS's own HyperPod agent
//     skill says "aws ssm send-command does NOT support sagemaker-cluster:
//     targets — only start-session works" and runs commands with
//     AWS-StartNonInteractiveCommand
//     (awslabs/agent-plugins, plugins/sagemaker-ai/skills/hyperpod-ssm/SKILL.md).
//   - HyperPod documents no slurmrestd; its Slurm is 24.11.0 on the current
//     HyperPod AMI for Slurm
//     (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-release-ami-slurm.html,
//     releases of 2025-11-22, 2025-12-29 and 2026-01-25), and the command
//     line tools' parsable output is the interface internal/slurm relies on.
//
// A Run is: StartSession with the document AWS-StartNonInteractiveCommand
// and the command "sh -c <script>" (Script, Command: every argument
// validated and single-quoted, so no argument is ever shell syntax); then
// the session's data channel, a WebSocket at the StreamUrl the call
// returns, spoken as AWS's Session Manager plugin speaks it (message.go);
// then TerminateSession. The whole Run is bounded by Timeout.
package slurmssm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"golang.org/x/net/websocket"

	"github.com/hyperpod-governance/portal/internal/slurm"
)

// Document is the Session Manager document that runs one command and ends
// the session (AWS-managed; its one parameter is "command").
const Document = "AWS-StartNonInteractiveCommand"

// ClientVersion is what the transport reports as its client version in the
// data channel's handshake.
const ClientVersion = "hyperpod-portal-slurmssm/1"

// DefaultTimeout bounds one Run when Transport.Timeout is zero.
const DefaultTimeout = 2 * time.Minute

// SessionAPI is the part of the SSM API the transport calls; *ssm.Client
// satisfies it.
type SessionAPI interface {
	StartSession(context.Context, *ssm.StartSessionInput, ...func(*ssm.Options)) (*ssm.StartSessionOutput, error)
	TerminateSession(context.Context, *ssm.TerminateSessionInput, ...func(*ssm.Options)) (*ssm.TerminateSessionOutput, error)
}

var _ SessionAPI = (*ssm.Client)(nil)

// Transport runs Slurm commands on one node through Session Manager.
type Transport struct {
	API SessionAPI
	// Target is the node's Session Manager target (see Target).
	Target string
	// SlurmBin is the directory of the Slurm commands on the node; empty:
	// the agent's PATH.
	SlurmBin string
	// Timeout bounds one Run: the session's start, the command and its
	// output (DefaultTimeout when zero).
	Timeout time.Duration
}

var _ slurm.EnvRunner = Transport{}

// Run implements slurm.Runner.
func (t Transport) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return t.RunEnv(ctx, nil, name, args...)
}

// RunEnv implements slurm.EnvRunner: the variables are set for the
// command alone (ScriptEnv).
func (t Transport) RunEnv(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	script, err := ScriptEnv(t.SlurmBin, env, name, args...)
	if err != nil {
		return nil, err
	}
	command, err := Command(script)
	if err != nil {
		return nil, err
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	what := strings.TrimSpace(name + " " + strings.Join(args, " "))
	out, reason, err := t.session(ctx, command)
	if err != nil {
		// The connection's deadline is the context's: either may fire
		// first.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("slurm: %s on %s: no result within %s: %w", what, t.Target, timeout, err)
		}
		return nil, fmt.Errorf("slurm: %s on %s: %w", what, t.Target, err)
	}
	res, err := ParseResult(out)
	if err != nil && reason != "" {
		return nil, fmt.Errorf("slurm: %s on %s: the agent closed the session: %s: %w", what, t.Target, reason, err)
	}
	if err != nil {
		return nil, fmt.Errorf("slurm: %s on %s: %w", what, t.Target, err)
	}
	if res.Exit != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = strings.TrimSpace(string(res.Stdout))
		}
		return res.Stdout, fmt.Errorf("slurm: %s: exit %d: %s", what, res.Exit, msg)
	}
	return res.Stdout, nil
}

// session starts a session that runs command, reads its output to the end
// and terminates it. reason is the agent's Output in channel_closed.
func (t Transport) session(ctx context.Context, command string) (out []byte, reason string, err error) {
	start, err := t.API.StartSession(ctx, &ssm.StartSessionInput{
		Target:       aws.String(t.Target),
		DocumentName: aws.String(Document),
		Parameters:   map[string][]string{"command": {command}},
		Reason:       aws.String("hyperpod-portal: Slurm accounting"),
	})
	if err != nil {
		return nil, "", fmt.Errorf("start session: %w", err)
	}
	id := aws.ToString(start.SessionId)
	defer func() {
		// A session that ended by itself is terminated already; this
		// one call is for the one that did not (a timeout, an error).
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = t.API.TerminateSession(tctx, &ssm.TerminateSessionInput{SessionId: aws.String(id)})
	}()
	return readChannel(ctx, aws.ToString(start.StreamUrl), aws.ToString(start.TokenValue))
}

// readChannel opens the session's data channel, presents the token,
// answers the agent's handshake, acknowledges every output message and
// returns the output (payload type Output, in sequence order) once the
// agent closes the channel.
func readChannel(ctx context.Context, streamURL, token string) ([]byte, string, error) {
	u, err := url.Parse(streamURL)
	if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") {
		return nil, "", fmt.Errorf("stream URL %q is not a WebSocket URL", streamURL)
	}
	origin := "https://" + u.Host
	cfg, err := websocket.NewConfig(streamURL, origin)
	if err != nil {
		return nil, "", err
	}
	conn, err := cfg.DialContext(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("data channel: %w", err)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	open, _ := json.Marshal(OpenDataChannel{MessageSchemaVersion: "1.0", RequestID: NewUUID().String(),
		TokenValue: token, ClientID: NewUUID().String(), ClientVersion: ClientVersion})
	if err := websocket.Message.Send(conn, string(open)); err != nil {
		return nil, "", fmt.Errorf("data channel: open: %w", err)
	}
	r := reader{conn: conn, pending: map[int64]Message{}}
	out, err := r.run()
	reason := ""
	if r.closed != nil {
		reason = strings.TrimSpace(r.closed.Output)
	}
	return out, reason, err
}

type reader struct {
	conn     *websocket.Conn
	expected int64 // next output sequence number to process
	outSeq   int64 // next input sequence number to send
	pending  map[int64]Message
	out      []byte
	closed   *ChannelClosed
}

func (r *reader) run() ([]byte, error) {
	for r.closed == nil {
		var frame []byte
		if err := websocket.Message.Receive(r.conn, &frame); err != nil {
			return r.out, fmt.Errorf("data channel closed before the agent's channel_closed: %w", err)
		}
		m, err := Decode(frame)
		if err != nil {
			return r.out, err
		}
		if err := r.handle(m); err != nil {
			return r.out, err
		}
	}
	return r.out, nil
}

func (r *reader) handle(m Message) error {
	switch m.Type {
	case MsgOutput:
		if err := r.ack(m); err != nil {
			return err
		}
		if m.SequenceNumber < r.expected {
			return nil // a resend of one already processed
		}
		r.pending[m.SequenceNumber] = m
		for {
			next, ok := r.pending[r.expected]
			if !ok {
				return nil
			}
			delete(r.pending, r.expected)
			r.expected++
			if err := r.process(next); err != nil {
				return err
			}
		}
	case MsgChannelClosed:
		var c ChannelClosed
		if err := json.Unmarshal(m.Payload, &c); err != nil {
			return fmt.Errorf("channel_closed payload: %w", err)
		}
		if len(r.pending) > 0 {
			return fmt.Errorf("channel closed with output messages %v missing before them", r.missing())
		}
		r.closed = &c
		return nil
	case MsgAcknowledge, MsgStartPublish, MsgPausePublish:
		return nil
	default:
		return fmt.Errorf("data channel: unexpected message type %q", m.Type)
	}
}

func (r *reader) missing() []int64 {
	var seqs []int64
	for s := range r.pending {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs
}

// process handles one output message in sequence order.
func (r *reader) process(m Message) error {
	switch m.PayloadType {
	case PayloadOutput, PayloadStdErr:
		r.out = append(r.out, m.Payload...)
	case PayloadHandshake:
		return r.handshake(m)
	case PayloadHandshakeC:
		return r.size()
	case PayloadError:
		return fmt.Errorf("agent error: %s", strings.TrimSpace(string(m.Payload)))
	}
	return nil
}

// handshake answers the agent's HandshakeRequest: the session type is
// accepted; KMS encryption (a Session Manager preference) is refused, as
// the transport does not decrypt, so the agent ends the session and the
// Run fails with the agent's reason rather than with garbled output.
func (r *reader) handshake(m Message) error {
	var req HandshakeRequest
	if err := json.Unmarshal(m.Payload, &req); err != nil {
		return fmt.Errorf("handshake request: %w", err)
	}
	resp := HandshakeResponse{ClientVersion: ClientVersion, ProcessedClientActions: []ProcessedAction{}, Errors: []string{}}
	for _, a := range req.RequestedClientActions {
		p := ProcessedAction{ActionType: a.ActionType, ActionStatus: 1}
		if a.ActionType != "SessionType" {
			p.ActionStatus = 3
			p.Error = "the portal's Slurm transport does not support " + a.ActionType
			resp.Errors = append(resp.Errors, p.Error)
		}
		resp.ProcessedClientActions = append(resp.ProcessedClientActions, p)
	}
	payload, _ := json.Marshal(resp)
	msg := NewMessage(MsgInput, r.outSeq, 0, PayloadHandshakeR, payload)
	r.outSeq++
	return websocket.Message.Send(r.conn, msg.Encode())
}

// size tells the agent the terminal's size once the handshake is
// complete, as AWS's plugin does for shell-type sessions, which
// NonInteractiveCommands is (src/datachannel/streaming.go,
// ProcessSessionTypeHandshakeAction; src/sessionmanagerplugin/session/
// shellsession/shellsession.go, handleTerminalResize, which sends a fixed
// size when there is no terminal). Wide, so the terminal never wraps.
func (r *reader) size() error {
	payload, _ := json.Marshal(map[string]uint32{"cols": 1000, "rows": 50})
	msg := NewMessage(MsgInput, r.outSeq, 0, PayloadSize, payload)
	r.outSeq++
	return websocket.Message.Send(r.conn, msg.Encode())
}

// ack acknowledges an output message (flags 3, sequence 0, as the plugin's
// SerializeClientMessageWithAcknowledgeContent sends them).
func (r *reader) ack(m Message) error {
	payload, _ := json.Marshal(Ack{MessageType: m.Type, MessageID: m.ID.String(), SequenceNumber: m.SequenceNumber, IsSequentialMessage: true})
	return websocket.Message.Send(r.conn, NewMessage(MsgAcknowledge, 0, 3, 0, payload).Encode())
}
