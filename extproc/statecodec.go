package extproc

import (
	"errors"
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	statev1 "github.com/switchyard-gw/switchyard/proto/switchyard/state/v1"
)

// The state's wire codec: the protobuf encoding of switchyard.state.v1.State, written and
// read with protowire instead of protobuf-go's table-driven codec, because every request
// pays a seal and an open (and every redirect two more), and on open that codec allocates
// each string and message separately: about 45 allocations for a redirect's state. Here an
// open makes a handful: every string is a substring of one copy of the plaintext, every
// header value a sub-slice of one buffer (the same allocation, after the copy), and the
// messages of a kind share one slab.
//
// The bytes are protobuf-go's own: fields in number order, zero values of implicit-presence
// fields left out, unknown fields kept and written back (a state sealed by a newer replica
// survives a pass through an older one). statecodec_test.go holds it to that: round trips
// against proto.Marshal / proto.Unmarshal over a state with every field set (found through
// the descriptor, so a field added to state.proto and not here fails it), and a fuzz target
// comparing decodeState with proto.Unmarshal on arbitrary input.
//
// Strings share the plaintext's copy, so a string kept from a state keeps the whole copy
// alive (under MaxSealedLen); nothing in switchyard keeps one past the request.

// Field numbers of state.proto.
const (
	fState_RequestId        protowire.Number = 1
	fState_PublicModel      protowire.Number = 2
	fState_Operation        protowire.Number = 3
	fState_Mode             protowire.Number = 4
	fState_StartUnixNano    protowire.Number = 5
	fState_DeadlineUnixNano protowire.Number = 6
	fState_Dialect          protowire.Number = 7
	fState_Attempts         protowire.Number = 8
	fState_Skips            protowire.Number = 9
	fState_Reason           protowire.Number = 10
	fState_ReasonFrom       protowire.Number = 11
	fState_ClientHeaders    protowire.Number = 12
	fState_Current          protowire.Number = 13
	fState_Redirects        protowire.Number = 14
	fState_AllowedModels    protowire.Number = 15

	fAttempt_DeploymentId    protowire.Number = 1
	fAttempt_Model           protowire.Number = 2
	fAttempt_Class           protowire.Number = 3
	fAttempt_Kind            protowire.Number = 4
	fAttempt_Quota           protowire.Number = 5
	fAttempt_Status          protowire.Number = 6
	fAttempt_LatencyNanos    protowire.Number = 7
	fAttempt_RetryAfterNanos protowire.Number = 8
	fAttempt_Message         protowire.Number = 9
	fAttempt_ErrorType       protowire.Number = 10
	fAttempt_ErrorCode       protowire.Number = 11
	fAttempt_Move            protowire.Number = 12
	fAttempt_FallbackReason  protowire.Number = 13
	fAttempt_FallbackHop     protowire.Number = 14
	fAttempt_Probe           protowire.Number = 15
	fAttempt_Pick            protowire.Number = 16
	fAttempt_AllOpenTry      protowire.Number = 17
	fAttempt_ProviderReqID   protowire.Number = 18
	fAttempt_RetryAfterHdr   protowire.Number = 19

	fSkip_DeploymentId protowire.Number = 1
	fSkip_Model        protowire.Number = 2
	fSkip_Reason       protowire.Number = 3
	fSkip_Cause        protowire.Number = 4

	fHeader_Name  protowire.Number = 1
	fHeader_Value protowire.Number = 2

	fCurrent_DeploymentId     protowire.Number = 1
	fCurrent_Model            protowire.Number = 2
	fCurrent_AttemptId        protowire.Number = 3
	fCurrent_StartUnixNano    protowire.Number = 4
	fCurrent_Move             protowire.Number = 5
	fCurrent_FallbackReason   protowire.Number = 6
	fCurrent_FallbackHop      protowire.Number = 7
	fCurrent_Probe            protowire.Number = 8
	fCurrent_Pick             protowire.Number = 9
	fCurrent_AllOpenTry       protowire.Number = 10
	fCurrent_ReasonFrom       protowire.Number = 11
	fCurrent_ReservedUnixNano protowire.Number = 12
	fCurrent_ReservedTokens   protowire.Number = 13
)

// appendState appends st's protobuf encoding to b.
func appendState(b []byte, st *statev1.State) []byte {
	b = appendString(b, fState_RequestId, st.RequestId)
	b = appendString(b, fState_PublicModel, st.PublicModel)
	b = appendVarint(b, fState_Operation, uint64(int64(st.Operation)))
	b = appendVarint(b, fState_Mode, uint64(int64(st.Mode)))
	b = appendFixed64(b, fState_StartUnixNano, st.StartUnixNano)
	b = appendFixed64(b, fState_DeadlineUnixNano, st.DeadlineUnixNano)
	b = appendVarint(b, fState_Dialect, uint64(int64(st.Dialect)))
	for _, a := range st.Attempts {
		var at int
		b, at = beginMessage(b, fState_Attempts)
		b = endMessage(appendAttempt(b, a), at)
	}
	for _, s := range st.Skips {
		var at int
		b, at = beginMessage(b, fState_Skips)
		b = endMessage(appendSkip(b, s), at)
	}
	b = appendVarint(b, fState_Reason, uint64(int64(st.Reason)))
	b = appendString(b, fState_ReasonFrom, st.ReasonFrom)
	for _, h := range st.ClientHeaders {
		var at int
		b, at = beginMessage(b, fState_ClientHeaders)
		b = endMessage(appendHeader(b, h), at)
	}
	if st.Current != nil {
		var at int
		b, at = beginMessage(b, fState_Current)
		b = endMessage(appendCurrent(b, st.Current), at)
	}
	b = appendVarint(b, fState_Redirects, uint64(st.Redirects))
	for _, m := range st.AllowedModels {
		b = appendBytesField(b, fState_AllowedModels, m) // repeated: empty strings too
	}
	return append(b, st.ProtoReflect().GetUnknown()...)
}

func appendAttempt(b []byte, a *statev1.Attempt) []byte {
	b = appendString(b, fAttempt_DeploymentId, a.DeploymentId)
	b = appendString(b, fAttempt_Model, a.Model)
	b = appendVarint(b, fAttempt_Class, uint64(int64(a.Class)))
	b = appendString(b, fAttempt_Kind, a.Kind)
	b = appendBool(b, fAttempt_Quota, a.Quota)
	b = appendVarint(b, fAttempt_Status, uint64(int64(a.Status)))
	b = appendFixed64(b, fAttempt_LatencyNanos, a.LatencyNanos)
	b = appendFixed64(b, fAttempt_RetryAfterNanos, a.RetryAfterNanos)
	b = appendString(b, fAttempt_Message, a.Message)
	b = appendString(b, fAttempt_ErrorType, a.ErrorType)
	b = appendString(b, fAttempt_ErrorCode, a.ErrorCode)
	b = appendVarint(b, fAttempt_Move, uint64(int64(a.Move)))
	b = appendVarint(b, fAttempt_FallbackReason, uint64(int64(a.FallbackReason)))
	b = appendVarint(b, fAttempt_FallbackHop, uint64(a.FallbackHop))
	b = appendBool(b, fAttempt_Probe, a.Probe)
	b = appendString(b, fAttempt_Pick, a.Pick)
	b = appendBool(b, fAttempt_AllOpenTry, a.AllOpenTry)
	b = appendString(b, fAttempt_ProviderReqID, a.ProviderRequestId)
	b = appendBool(b, fAttempt_RetryAfterHdr, a.RetryAfterHeader)
	return append(b, a.ProtoReflect().GetUnknown()...)
}

func appendSkip(b []byte, s *statev1.Skip) []byte {
	b = appendString(b, fSkip_DeploymentId, s.DeploymentId)
	b = appendString(b, fSkip_Model, s.Model)
	b = appendString(b, fSkip_Reason, s.Reason)
	b = appendVarint(b, fSkip_Cause, uint64(int64(s.Cause)))
	return append(b, s.ProtoReflect().GetUnknown()...)
}

func appendHeader(b []byte, h *statev1.Header) []byte {
	b = appendString(b, fHeader_Name, h.Name)
	if h.Value != nil { // explicit presence: an empty value is sent, an absent one is not
		b = appendBytesField(b, fHeader_Value, h.Value)
	}
	return append(b, h.ProtoReflect().GetUnknown()...)
}

func appendCurrent(b []byte, c *statev1.Current) []byte {
	b = appendString(b, fCurrent_DeploymentId, c.DeploymentId)
	b = appendString(b, fCurrent_Model, c.Model)
	b = appendString(b, fCurrent_AttemptId, c.AttemptId)
	b = appendFixed64(b, fCurrent_StartUnixNano, c.StartUnixNano)
	b = appendVarint(b, fCurrent_Move, uint64(int64(c.Move)))
	b = appendVarint(b, fCurrent_FallbackReason, uint64(int64(c.FallbackReason)))
	b = appendVarint(b, fCurrent_FallbackHop, uint64(c.FallbackHop))
	b = appendBool(b, fCurrent_Probe, c.Probe)
	b = appendString(b, fCurrent_Pick, c.Pick)
	b = appendBool(b, fCurrent_AllOpenTry, c.AllOpenTry)
	b = appendString(b, fCurrent_ReasonFrom, c.ReasonFrom)
	b = appendFixed64(b, fCurrent_ReservedUnixNano, c.ReservedUnixNano)
	b = appendVarint(b, fCurrent_ReservedTokens, uint64(c.ReservedTokens))
	return append(b, c.ProtoReflect().GetUnknown()...)
}

// Tags (field number << 3 | wire type) of state.proto's fields, what the decoder switches on.
const (
	tVarint = uint64(protowire.VarintType)
	tFixed  = uint64(protowire.Fixed64Type)
	tBytes  = uint64(protowire.BytesType)
)

func tagOf(n protowire.Number, t uint64) uint64 { return uint64(n)<<3 | t }

// stateDecoder reads one plaintext: str is the plaintext's copy as a string (the strings'
// backing), vals the header values' backing.
type stateDecoder struct {
	data []byte
	str  string
	vals []byte
}

// stateSlab holds a state and its current attempt in one allocation.
type stateSlab struct {
	st  statev1.State
	cur statev1.Current
}

// readField reads the field at the start of b: its tag, its value (v for varint and fixed64
// fields, val, a sub-slice of b, for bytes fields) and its length n, or a protowire error
// code as n < 0. Fast paths for one-byte tags, varints and lengths, which are nearly all.
func readField(b []byte) (tag, v uint64, val []byte, n int) {
	var num protowire.Number
	var typ protowire.Type
	if len(b) > 0 && b[0] < 0x80 && b[0] >= 8 {
		num, typ, n = protowire.Number(b[0]>>3), protowire.Type(b[0]&7), 1
	} else if num, typ, n = protowire.ConsumeTag(b); n < 0 {
		return 0, 0, nil, n
	} else if num > protowire.MaxValidNumber {
		// protowire takes up to MaxInt32; proto.Unmarshal refuses beyond 2^29-1.
		return 0, 0, nil, codeFieldNumber
	}
	rest := b[n:]
	var m int
	switch typ {
	case protowire.VarintType:
		if len(rest) > 0 && rest[0] < 0x80 {
			v, m = uint64(rest[0]), 1
		} else {
			v, m = protowire.ConsumeVarint(rest)
		}
	case protowire.Fixed64Type:
		v, m = protowire.ConsumeFixed64(rest)
	case protowire.BytesType:
		if len(rest) > 0 && rest[0] < 0x80 && int(rest[0]) < len(rest) {
			m = 1 + int(rest[0])
			val = rest[1:m]
		} else {
			val, m = protowire.ConsumeBytes(rest)
		}
	default:
		m = protowire.ConsumeFieldValue(num, typ, rest)
	}
	if m < 0 {
		return 0, 0, nil, m
	}
	return uint64(num)<<3 | uint64(typ), v, val, n + m
}

// codeFieldNumber is readField's code for a field number above protowire.MaxValidNumber,
// outside protowire's own (negative) codes.
const codeFieldNumber = -1000

func fieldError(b []byte, code int) error {
	if code == codeFieldNumber {
		return errors.New("attempt state: field number out of range")
	}
	num, _, _ := protowire.ConsumeTag(b)
	return fmt.Errorf("attempt state field %d: %w", num, protowire.ParseError(code))
}

// string is val, a sub-slice of the plaintext, as a substring of its string copy.
func (d *stateDecoder) string(val []byte) string {
	off := cap(d.data) - cap(val)
	return d.str[off : off+len(val)]
}

// fieldReader walks the fields of one message: after each next, tag and v or val hold the
// field (as readField reads it) and field its whole encoding; unknown collects the fields
// the decoder keeps (keepUnknown). A plain loop over it rather than a callback per field:
// the decoder's switches stay inline.
type fieldReader struct {
	rest    []byte
	field   []byte
	tag, v  uint64
	val     []byte
	unknown []byte
	err     error
}

func (r *fieldReader) next() bool {
	b := r.rest
	if len(b) == 0 {
		return false
	}
	// The common field inline: a one-byte tag, and a one-byte varint or a bytes field with a
	// one-byte length.
	if len(b) >= 2 && b[0] >= 8 && b[0] < 0x80 && b[1] < 0x80 {
		switch b[0] & 7 {
		case byte(protowire.VarintType):
			r.tag, r.v, r.field, r.rest = uint64(b[0]), uint64(b[1]), b[:2], b[2:]
			return true
		case byte(protowire.BytesType):
			if m := 2 + int(b[1]); m <= len(b) {
				r.tag, r.val, r.field, r.rest = uint64(b[0]), b[2:m], b[:m], b[m:]
				return true
			}
		}
	}
	tag, v, val, n := readField(b)
	if n < 0 {
		r.err, r.rest = fieldError(b, n), nil
		return false
	}
	r.field, r.rest = b[:n], b[n:]
	r.tag, r.v, r.val = tag, v, val
	return true
}

// keepUnknown keeps the reader's field as proto.Unmarshal keeps a field it does not know or
// whose wire type differs: the tag re-encoded minimally, the value as read.
func (r *fieldReader) keepUnknown() {
	num, typ, tn := protowire.ConsumeTag(r.field)
	r.unknown = append(protowire.AppendTag(r.unknown, num, typ), r.field[tn:]...)
}

// finish gives m the unknown fields kept, once the message is read, and returns the reader's
// error.
func (r *fieldReader) finish(m protoreflect.ProtoMessage) error {
	if r.err == nil && len(r.unknown) > 0 {
		m.ProtoReflect().SetUnknown(r.unknown)
	}
	return r.err
}

// decodeState parses a state's protobuf encoding with proto.Unmarshal's semantics: the last
// of a repeated scalar wins, repeated fields append, a repeated singular message merges, and
// an unknown field, or a known one of another wire type, is kept as an unknown field.
func decodeState(data []byte) (*statev1.State, error) {
	// Count the repeated messages first, so that each kind gets one slab.
	var nAttempts, nSkips, nHeaders, headerBytes, nModels int
	count := fieldReader{rest: data}
	for count.next() {
		switch count.tag {
		case tagOf(fState_Attempts, tBytes):
			nAttempts++
		case tagOf(fState_Skips, tBytes):
			nSkips++
		case tagOf(fState_ClientHeaders, tBytes):
			nHeaders++
			headerBytes += len(count.val) // bounds the values' bytes
		case tagOf(fState_AllowedModels, tBytes):
			nModels++
		}
	}
	if count.err != nil {
		return nil, count.err
	}
	// One allocation backs the strings (a copy of data, as a string) and, after it, the header
	// values. unsafe.String is sound here: nothing writes the copy once made, as no slice of
	// it leaves this function; the values' region after it is handed out with capped capacity.
	backing := make([]byte, len(data), len(data)+headerBytes)
	copy(backing, data)
	d := stateDecoder{data: data[:len(data):len(data)], vals: backing[len(data):len(data)]}
	if len(data) > 0 {
		d.str = unsafe.String(&backing[0], len(data))
	}
	slab := &stateSlab{}
	st := &slab.st
	attempts := make([]statev1.Attempt, nAttempts)
	skips := make([]statev1.Skip, nSkips)
	headers := make([]statev1.Header, nHeaders)
	if nAttempts > 0 {
		st.Attempts = make([]*statev1.Attempt, 0, nAttempts)
	}
	if nSkips > 0 {
		st.Skips = make([]*statev1.Skip, 0, nSkips)
	}
	if nHeaders > 0 {
		st.ClientHeaders = make([]*statev1.Header, 0, nHeaders)
	}
	if nModels > 0 {
		st.AllowedModels = make([]string, 0, nModels)
	}
	r := fieldReader{rest: d.data}
	for r.next() {
		var err error
		switch r.tag {
		case tagOf(fState_RequestId, tBytes):
			st.RequestId = d.string(r.val)
		case tagOf(fState_PublicModel, tBytes):
			st.PublicModel = d.string(r.val)
		case tagOf(fState_Operation, tVarint):
			st.Operation = statev1.Operation(int32(r.v))
		case tagOf(fState_Mode, tVarint):
			st.Mode = statev1.Mode(int32(r.v))
		case tagOf(fState_StartUnixNano, tFixed):
			st.StartUnixNano = int64(r.v)
		case tagOf(fState_DeadlineUnixNano, tFixed):
			st.DeadlineUnixNano = int64(r.v)
		case tagOf(fState_Dialect, tVarint):
			st.Dialect = statev1.Dialect(int32(r.v))
		case tagOf(fState_Attempts, tBytes):
			a := &attempts[len(st.Attempts)]
			st.Attempts = append(st.Attempts, a)
			err = d.attempt(a, r.val)
		case tagOf(fState_Skips, tBytes):
			s := &skips[len(st.Skips)]
			st.Skips = append(st.Skips, s)
			err = d.skip(s, r.val)
		case tagOf(fState_Reason, tVarint):
			st.Reason = statev1.FallbackReason(int32(r.v))
		case tagOf(fState_ReasonFrom, tBytes):
			st.ReasonFrom = d.string(r.val)
		case tagOf(fState_ClientHeaders, tBytes):
			h := &headers[len(st.ClientHeaders)]
			st.ClientHeaders = append(st.ClientHeaders, h)
			err = d.header(h, r.val)
		case tagOf(fState_Current, tBytes):
			if st.Current == nil {
				st.Current = &slab.cur
			}
			err = d.current(st.Current, r.val)
		case tagOf(fState_Redirects, tVarint):
			st.Redirects = uint32(r.v)
		case tagOf(fState_AllowedModels, tBytes):
			st.AllowedModels = append(st.AllowedModels, d.string(r.val))
		default:
			r.keepUnknown()
		}
		if err != nil {
			return nil, err
		}
	}
	if err := r.finish(st); err != nil {
		return nil, err
	}
	return st, nil
}

func (d *stateDecoder) attempt(a *statev1.Attempt, b []byte) error {
	r := fieldReader{rest: b}
	for r.next() {
		switch r.tag {
		case tagOf(fAttempt_DeploymentId, tBytes):
			a.DeploymentId = d.string(r.val)
		case tagOf(fAttempt_Model, tBytes):
			a.Model = d.string(r.val)
		case tagOf(fAttempt_Class, tVarint):
			a.Class = statev1.Class(int32(r.v))
		case tagOf(fAttempt_Kind, tBytes):
			a.Kind = d.string(r.val)
		case tagOf(fAttempt_Quota, tVarint):
			a.Quota = r.v != 0
		case tagOf(fAttempt_Status, tVarint):
			a.Status = int32(r.v)
		case tagOf(fAttempt_LatencyNanos, tFixed):
			a.LatencyNanos = int64(r.v)
		case tagOf(fAttempt_RetryAfterNanos, tFixed):
			a.RetryAfterNanos = int64(r.v)
		case tagOf(fAttempt_Message, tBytes):
			a.Message = d.string(r.val)
		case tagOf(fAttempt_ErrorType, tBytes):
			a.ErrorType = d.string(r.val)
		case tagOf(fAttempt_ErrorCode, tBytes):
			a.ErrorCode = d.string(r.val)
		case tagOf(fAttempt_Move, tVarint):
			a.Move = statev1.Move(int32(r.v))
		case tagOf(fAttempt_FallbackReason, tVarint):
			a.FallbackReason = statev1.FallbackReason(int32(r.v))
		case tagOf(fAttempt_FallbackHop, tVarint):
			a.FallbackHop = uint32(r.v)
		case tagOf(fAttempt_Probe, tVarint):
			a.Probe = r.v != 0
		case tagOf(fAttempt_Pick, tBytes):
			a.Pick = d.string(r.val)
		case tagOf(fAttempt_AllOpenTry, tVarint):
			a.AllOpenTry = r.v != 0
		case tagOf(fAttempt_ProviderReqID, tBytes):
			a.ProviderRequestId = d.string(r.val)
		case tagOf(fAttempt_RetryAfterHdr, tVarint):
			a.RetryAfterHeader = r.v != 0
		default:
			r.keepUnknown()
		}
	}
	return r.finish(a)
}

func (d *stateDecoder) skip(s *statev1.Skip, b []byte) error {
	r := fieldReader{rest: b}
	for r.next() {
		switch r.tag {
		case tagOf(fSkip_DeploymentId, tBytes):
			s.DeploymentId = d.string(r.val)
		case tagOf(fSkip_Model, tBytes):
			s.Model = d.string(r.val)
		case tagOf(fSkip_Reason, tBytes):
			s.Reason = d.string(r.val)
		case tagOf(fSkip_Cause, tVarint):
			s.Cause = statev1.SkipCause(int32(r.v))
		default:
			r.keepUnknown()
		}
	}
	return r.finish(s)
}

func (d *stateDecoder) header(h *statev1.Header, b []byte) error {
	r := fieldReader{rest: b}
	for r.next() {
		switch r.tag {
		case tagOf(fHeader_Name, tBytes):
			h.Name = d.string(r.val)
		case tagOf(fHeader_Value, tBytes):
			// Capacity capped: appending to one value must not overwrite the next.
			at := len(d.vals)
			d.vals = append(d.vals, r.val...)
			h.Value = d.vals[at:len(d.vals):len(d.vals)]
		default:
			r.keepUnknown()
		}
	}
	return r.finish(h)
}

func (d *stateDecoder) current(c *statev1.Current, b []byte) error {
	// A repeated Current merges, its unknown fields too.
	r := fieldReader{rest: b, unknown: c.ProtoReflect().GetUnknown()}
	for r.next() {
		switch r.tag {
		case tagOf(fCurrent_DeploymentId, tBytes):
			c.DeploymentId = d.string(r.val)
		case tagOf(fCurrent_Model, tBytes):
			c.Model = d.string(r.val)
		case tagOf(fCurrent_AttemptId, tBytes):
			c.AttemptId = d.string(r.val)
		case tagOf(fCurrent_StartUnixNano, tFixed):
			c.StartUnixNano = int64(r.v)
		case tagOf(fCurrent_Move, tVarint):
			c.Move = statev1.Move(int32(r.v))
		case tagOf(fCurrent_FallbackReason, tVarint):
			c.FallbackReason = statev1.FallbackReason(int32(r.v))
		case tagOf(fCurrent_FallbackHop, tVarint):
			c.FallbackHop = uint32(r.v)
		case tagOf(fCurrent_Probe, tVarint):
			c.Probe = r.v != 0
		case tagOf(fCurrent_Pick, tBytes):
			c.Pick = d.string(r.val)
		case tagOf(fCurrent_AllOpenTry, tVarint):
			c.AllOpenTry = r.v != 0
		case tagOf(fCurrent_ReasonFrom, tBytes):
			c.ReasonFrom = d.string(r.val)
		case tagOf(fCurrent_ReservedUnixNano, tFixed):
			c.ReservedUnixNano = int64(r.v)
		case tagOf(fCurrent_ReservedTokens, tVarint):
			c.ReservedTokens = int64(r.v)
		default:
			r.keepUnknown()
		}
	}
	return r.finish(c)
}
