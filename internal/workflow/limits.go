package workflow

import (
	"fmt"
	"strconv"
	"strings"
)

// Size limits. A contract is stored as a new immutable version on every
// changed save, drafts included, so every text and every list of it has a
// cap that holds for drafts too: without one, a draft could hold any value
// up to the 1 MiB request body, and each save would keep another copy.
//
// Lengths count characters (Unicode code points, as people count them) of
// the tidied value: trimmed, \r\n as \n. One character is at most 4 bytes
// of UTF-8, so the bytes of a value are at most four times its cap.
// TestLargestContractSize checks what that makes of a whole contract.
//
// The table Limits, which the rows of the field table (fields.go) make, is
// the one source of these numbers: validation (LimitErrors, and Validate
// through it), the form's help text and the README's table
// (TestDocsListEveryLimit) all read it.
const (
	// MaxOneLineLen caps any one-line value that has no cap of its own
	// (ids, names, region, enumerations, dates, namespaces, instance types,
	// priority classes, Slurm names, destinations). Its own format rule is
	// stricter for a complete contract (a 12-digit account, a 63-character
	// namespace); this cap is what a draft may hold.
	MaxOneLineLen = 256
	// MaxEmailLen caps an owner's email: the longest address validEmail
	// accepts.
	MaxEmailLen = 254
	// MaxARNLen caps the cluster and role ARNs: an IAM role ARN is at most
	// 2048 characters (IAM API Role.Arn, "Length Constraints: Minimum length
	// of 20. Maximum length of 2048",
	// https://docs.aws.amazon.com/IAM/latest/APIReference/API_Role.html).
	MaxARNLen = 2048
	// MaxRowTextLen caps the free text of a list's row: a signal's
	// response, an egress allowance's reason. A row says in a sentence or
	// two what happens or why; twenty rows of it stay small.
	MaxRowTextLen = 500

	// Rows of the lists. Enough for any team we know of (a team usually has
	// one namespace, one or two instance types, a handful of signals), and
	// small enough that the largest contract stays a few hundred KiB.
	MaxNamespaces      = 10
	MaxGuaranteedRows  = 20
	MaxPriorityClasses = 20
	MaxSignals         = 20
	MaxEgressRows      = 20
	MaxPortsPerEgress  = 20

	// MaxVersions caps the versions of one connection. Every changed save
	// adds one; a request still changing after 100 versions is better filed
	// anew, and the cap bounds the history one connection keeps (100
	// versions of the largest contract, TestLargestContractSize). The store
	// enforces it inside the save's transaction.
	MaxVersions = 100

	// MaxContractJSON bounds the canonical JSON of the largest contract the
	// caps allow (every text at its cap in characters JSON spells with six
	// bytes, every list full): TestLargestContractSize measures it.
	MaxContractJSON = 400 << 10
)

// Limit is the cap of one field of a contract.
type Limit struct {
	// Field is the field's path as in FieldError, with "[]" for each row
	// of a list: "signals[].response" caps every signal's response.
	Field string
	// Chars caps a text value, in characters; 0 when the field is a list.
	Chars int
	// Rows caps a list's rows; 0 when the field is a text.
	Rows int

	texts  func(Contract) []string // one value per row for a "[]" path
	counts func(Contract) []int    // the row count (per parent row for a "[]" path)
}

// What says the cap in words, for help text and the README: "at most 2000
// characters", "at most 10 rows".
func (l Limit) What() string {
	if l.Rows > 0 {
		return "at most " + strconv.Itoa(l.Rows) + " rows"
	}
	return "at most " + strconv.Itoa(l.Chars) + " characters"
}

func one(f func(Contract) string) func(Contract) []string {
	return func(c Contract) []string { return []string{f(c)} }
}

func rows[T any](f func(Contract) []T) func(Contract) []int {
	return func(c Contract) []int { return []int{len(f(c))} }
}

func each[T any](list func(Contract) []T, f func(T) string) func(Contract) []string {
	return func(c Contract) []string {
		l := list(c)
		out := make([]string, len(l))
		for i, x := range l {
			out[i] = f(x)
		}
		return out
	}
}

func text1(path string, chars int, f func(Contract) string) Limit {
	return Limit{Field: path, Chars: chars, texts: one(f)}
}

var (
	getGuaranteed = func(c Contract) []Capacity { return c.Scheduling.Guaranteed }
	getSignals    = func(c Contract) []Signal { return c.Signals }
	getEgress     = func(c Contract) []Egress { return c.EgressAllowances }
)

// Limits are the caps of every text and list of the contract, in form
// order: each row of the field table (fields.go) brings its own.
var Limits = fieldLimits()

func fieldLimits() []Limit {
	var out []Limit
	for _, f := range contractFields {
		out = append(out, f.limits...)
	}
	return out
}

// LimitOf returns the cap of a field path ("signals[].response"), or false.
func LimitOf(field string) (Limit, bool) {
	for _, l := range Limits {
		if l.Field == field {
			return l, true
		}
	}
	return Limit{}, false
}

// LimitErrors reports every value of c over its cap, one message per field
// (a path with the row's index), in form order. It checks the tidied
// values, as Validate does. A list over its row cap is reported once, and
// only its first rows up to the cap are checked further, so that a huge
// list gets a short answer.
//
// Validate reports the same messages; a draft, which may be incomplete, is
// saved only when LimitErrors finds nothing.
func (c Contract) LimitErrors() FieldErrors {
	return limitErrors(c.tidy())
}

func limitErrors(c Contract) FieldErrors {
	var errs FieldErrors
	for _, l := range Limits {
		if l.Rows > 0 {
			for i, n := range l.counts(c) {
				if n > l.Rows {
					errs.Add(rowPath(l.Field, i), fmt.Sprintf("has too many rows (%d): at most %d", n, l.Rows))
				}
			}
			continue
		}
		vals := l.texts(c)
		if most, ok := parentRows(l.Field); ok && len(vals) > most {
			vals = vals[:most]
		}
		for i, s := range vals {
			if n := runeLen(s); n > l.Chars {
				errs.Add(rowPath(l.Field, i), fmt.Sprintf("is too long (%d characters): at most %d", n, l.Chars))
			}
		}
	}
	return errs
}

// rowPath puts row i into the first "[]" of a table path.
func rowPath(field string, i int) string {
	return strings.Replace(field, "[]", "["+strconv.Itoa(i)+"]", 1)
}

// parentRows is the row cap of the list a "[]" path is a row of.
func parentRows(field string) (int, bool) {
	list, _, ok := strings.Cut(field, "[]")
	if !ok {
		return 0, false
	}
	l, ok := LimitOf(list)
	return l.Rows, ok && l.Rows > 0
}

// formRank orders field paths as the form shows them: the position in
// contractFields of the field (or group) the path belongs to.
func formRank(path string) int {
	root := path
	if i := strings.IndexByte(root, '['); i >= 0 {
		root = root[:i]
	}
	for i, f := range contractFields {
		if f.Path == root || strings.HasPrefix(f.Path, root+".") {
			return i
		}
	}
	return len(contractFields)
}

// insertInFormOrder adds fe after the last problem that the form shows
// before it, and before the problems of its own field's rows (a list's
// "too many rows" comes before what is wrong with its rows), so that
// FieldErrors stay in form order.
func (e *FieldErrors) insertInFormOrder(fe FieldError) {
	r := formRank(fe.Field)
	at := 0
	for i, x := range *e {
		if formRank(x.Field) < r {
			at = i + 1
		}
	}
	*e = append((*e)[:at], append(FieldErrors{fe}, (*e)[at:]...)...)
}

// capRows cuts every list of c to its row cap, so that the rules that look
// at each row (some ask the database) do a bounded amount of work; the
// rows beyond the cap are refused by LimitErrors anyway.
// Each list's row of the field table cuts its own list.
func capRows(c Contract) Contract {
	for _, f := range contractFields {
		if f.cut != nil {
			f.cut(&c)
		}
	}
	return c
}

func firstRows[T any](l []T, n int) []T {
	if len(l) > n {
		return l[:n:n]
	}
	return l
}
