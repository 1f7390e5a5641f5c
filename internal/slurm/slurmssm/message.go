package slurmssm

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The Session Manager data channel carries binary frames, each one message
// with a fixed header. The layout is the one AWS's own client, the Session
// Manager plugin, reads and writes (aws/session-manager-plugin,
// src/message/clientmessage.go and messageparser.go): all integers
// big-endian,
//
//	HeaderLength   uint32  (116: the offset of PayloadLength)
//	MessageType    32 bytes, UTF-8, padded with spaces
//	SchemaVersion  uint32
//	CreatedDate    uint64  (epoch milliseconds)
//	SequenceNumber int64
//	Flags          uint64
//	MessageId      16 bytes: the UUID's low 8 bytes, then its high 8
//	PayloadDigest  32 bytes: SHA-256 of the payload
//	PayloadType    uint32
//	PayloadLength  uint32
//	Payload
const (
	headerLength  = 116
	typeLength    = 32
	payloadOffset = headerLength + 4
)

// Message types and payload types of the data channel (clientmessage.go).
const (
	MsgInput          = "input_stream_data"
	MsgOutput         = "output_stream_data"
	MsgAcknowledge    = "acknowledge"
	MsgChannelClosed  = "channel_closed"
	MsgStartPublish   = "start_publication"
	MsgPausePublish   = "pause_publication"
	PayloadOutput     = 1
	PayloadError      = 2
	PayloadSize       = 3 // terminal size, from the client
	PayloadHandshake  = 5 // HandshakeRequest, from the agent
	PayloadHandshakeR = 6 // HandshakeResponse, from the client
	PayloadHandshakeC = 7 // HandshakeComplete, from the agent
	PayloadStdErr     = 11
	PayloadExitCode   = 12
)

// Message is one data channel message.
type Message struct {
	Type           string
	SchemaVersion  uint32
	CreatedDate    uint64
	SequenceNumber int64
	Flags          uint64
	ID             UUID
	PayloadType    uint32
	Payload        []byte
}

// UUID is a message id.
type UUID [16]byte

// NewUUID is a random (version 4) UUID.
func NewUUID() UUID {
	var u UUID
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// String is the UUID's hyphenated form, as acknowledgements name it.
func (u UUID) String() string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// NewMessage is a message of the given type and payload, created now.
func NewMessage(typ string, seq int64, flags uint64, payloadType uint32, payload []byte) Message {
	return Message{Type: typ, SchemaVersion: 1, CreatedDate: uint64(time.Now().UnixMilli()),
		SequenceNumber: seq, Flags: flags, ID: NewUUID(), PayloadType: payloadType, Payload: payload}
}

// Encode writes the message in the data channel's binary layout.
func (m Message) Encode() []byte {
	b := make([]byte, payloadOffset+len(m.Payload))
	binary.BigEndian.PutUint32(b[0:], headerLength)
	copy(b[4:4+typeLength], []byte(m.Type + strings.Repeat(" ", typeLength))[:typeLength])
	binary.BigEndian.PutUint32(b[36:], m.SchemaVersion)
	binary.BigEndian.PutUint64(b[40:], m.CreatedDate)
	binary.BigEndian.PutUint64(b[48:], uint64(m.SequenceNumber))
	binary.BigEndian.PutUint64(b[56:], m.Flags)
	copy(b[64:72], m.ID[8:16])
	copy(b[72:80], m.ID[0:8])
	digest := sha256.Sum256(m.Payload)
	copy(b[80:112], digest[:])
	binary.BigEndian.PutUint32(b[112:], m.PayloadType)
	binary.BigEndian.PutUint32(b[116:], uint32(len(m.Payload)))
	copy(b[payloadOffset:], m.Payload)
	return b
}

// Decode reads one message, checking its header length, payload length and
// payload digest.
func Decode(b []byte) (Message, error) {
	if len(b) < payloadOffset {
		return Message{}, fmt.Errorf("data channel message of %d bytes is shorter than its header", len(b))
	}
	if hl := binary.BigEndian.Uint32(b[0:]); hl != headerLength {
		return Message{}, fmt.Errorf("data channel message header length %d, want %d", hl, headerLength)
	}
	var m Message
	m.Type = strings.TrimSpace(string(bytes.Trim(b[4:4+typeLength], "\x00")))
	m.SchemaVersion = binary.BigEndian.Uint32(b[36:])
	m.CreatedDate = binary.BigEndian.Uint64(b[40:])
	m.SequenceNumber = int64(binary.BigEndian.Uint64(b[48:]))
	m.Flags = binary.BigEndian.Uint64(b[56:])
	copy(m.ID[8:16], b[64:72])
	copy(m.ID[0:8], b[72:80])
	m.PayloadType = binary.BigEndian.Uint32(b[112:])
	n := binary.BigEndian.Uint32(b[116:])
	if int(n) != len(b)-payloadOffset {
		return Message{}, fmt.Errorf("data channel message %s says %d payload bytes, carries %d", m.Type, n, len(b)-payloadOffset)
	}
	m.Payload = b[payloadOffset:]
	if digest := sha256.Sum256(m.Payload); !bytes.Equal(digest[:], b[80:112]) {
		return Message{}, errors.New("data channel message " + m.Type + ": payload digest does not match")
	}
	return m, nil
}

// Ack is the payload of an acknowledge message (clientmessage.go,
// AcknowledgeContent).
type Ack struct {
	MessageType         string `json:"AcknowledgedMessageType"`
	MessageID           string `json:"AcknowledgedMessageId"`
	SequenceNumber      int64  `json:"AcknowledgedMessageSequenceNumber"`
	IsSequentialMessage bool   `json:"IsSequentialMessage"`
}

// OpenDataChannel is the first (text) frame a client sends: it presents the
// session's token (session-manager-plugin src/service/service.go,
// OpenDataChannelInput; MessageSchemaVersion "1.0", src/config/config.go).
type OpenDataChannel struct {
	MessageSchemaVersion string `json:"MessageSchemaVersion"`
	RequestID            string `json:"RequestId"`
	TokenValue           string `json:"TokenValue"`
	ClientID             string `json:"ClientId"`
	ClientVersion        string `json:"ClientVersion"`
}

// HandshakeRequest is what the agent asks of the client before it runs
// the command (src/message/handshakemessage.go).
type HandshakeRequest struct {
	AgentVersion           string          `json:"AgentVersion"`
	RequestedClientActions []RequestAction `json:"RequestedClientActions"`
}

// RequestAction is one requested client action ("SessionType",
// "KMSEncryption").
type RequestAction struct {
	ActionType       string         `json:"ActionType"`
	ActionParameters map[string]any `json:"ActionParameters"`
}

// HandshakeResponse is the client's answer.
type HandshakeResponse struct {
	ClientVersion          string            `json:"ClientVersion"`
	ProcessedClientActions []ProcessedAction `json:"ProcessedClientActions"`
	Errors                 []string          `json:"Errors"`
}

// ProcessedAction is one action's outcome: ActionStatus 1 success, 2
// failed, 3 unsupported.
type ProcessedAction struct {
	ActionType   string `json:"ActionType"`
	ActionStatus int    `json:"ActionStatus"`
	ActionResult any    `json:"ActionResult"`
	Error        string `json:"Error"`
}

// ChannelClosed is the payload of a channel_closed message.
type ChannelClosed struct {
	MessageID     string `json:"MessageId"`
	CreatedDate   string `json:"CreatedDate"`
	DestinationID string `json:"DestinationId"`
	SessionID     string `json:"SessionId"`
	MessageType   string `json:"MessageType"`
	SchemaVersion int    `json:"SchemaVersion"`
	Output        string `json:"Output"`
}
