package foundationdb

// The operator's lock value as FDB tuples, and keys and values as fdbcli prints and reads them
// (printable()'s escaping), for the lock key of fdblock.go.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// EncodeLockValue packs v as the FDB tuple (string, int, int) the operator writes
// (tuple.Tuple{ownerID, start, end}.Pack()).
func EncodeLockValue(v LockValue) []byte {
	var b []byte
	b = append(b, 0x02)
	for i := 0; i < len(v.Owner); i++ {
		b = append(b, v.Owner[i])
		if v.Owner[i] == 0 {
			b = append(b, 0xff)
		}
	}
	b = append(b, 0x00)
	b = appendTupleInt(b, v.Start)
	return appendTupleInt(b, v.End)
}

// appendTupleInt is the tuple layer's integer: 0x14 for zero, 0x14±n and n big-endian bytes
// (one's complement for negatives).
func appendTupleInt(b []byte, n int64) []byte {
	if n == 0 {
		return append(b, 0x14)
	}
	neg := n < 0
	u := uint64(n)
	if neg {
		u = uint64(-n)
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], u)
	i := 0
	for i < 7 && buf[i] == 0 {
		i++
	}
	digits := buf[i:]
	if !neg {
		b = append(b, byte(0x14+len(digits)))
		return append(b, digits...)
	}
	b = append(b, byte(0x14-len(digits)))
	for _, d := range digits {
		b = append(b, ^d)
	}
	return b
}

// DecodeLockValue unpacks the operator's lock tuple; an error for anything else (the
// operator's invalidLockValue).
func DecodeLockValue(b []byte) (LockValue, error) {
	var v LockValue
	if len(b) == 0 || b[0] != 0x02 {
		return v, errors.New("not a tuple starting with a string")
	}
	i := 1
	var owner []byte
	for ; ; i++ {
		if i >= len(b) {
			return v, errors.New("unterminated string")
		}
		if b[i] == 0 {
			if i+1 < len(b) && b[i+1] == 0xff {
				owner = append(owner, 0)
				i++
				continue
			}
			i++
			break
		}
		owner = append(owner, b[i])
	}
	v.Owner = string(owner)
	var err error
	if v.Start, i, err = tupleInt(b, i); err != nil {
		return v, err
	}
	if v.End, i, err = tupleInt(b, i); err != nil {
		return v, err
	}
	if i != len(b) {
		return v, errors.New("more than three elements")
	}
	return v, nil
}

func tupleInt(b []byte, i int) (int64, int, error) {
	if i >= len(b) {
		return 0, i, errors.New("missing integer")
	}
	code := int(b[i])
	if code < 0x0c || code > 0x1c {
		return 0, i, fmt.Errorf("element type 0x%02x is not an integer", code)
	}
	n := code - 0x14
	neg := n < 0
	if neg {
		n = -n
	}
	if n > 8 || i+1+n > len(b) {
		return 0, i, errors.New("integer out of range")
	}
	var u uint64
	for _, d := range b[i+1 : i+1+n] {
		if neg {
			d = ^d
		}
		u = u<<8 | uint64(d)
	}
	if u > 1<<62 {
		return 0, i, errors.New("integer out of range")
	}
	if neg {
		return -int64(u), i + 1 + n, nil
	}
	return int64(u), i + 1 + n, nil
}

// parseGets reads the results of fdbcli's get and getrange lines: "`KEY' is `VALUE'", each
// printable()-escaped (\xHH, \\). "`KEY': not found" lines are left out.
func parseGets(out string) map[string][]byte {
	res := map[string][]byte{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "`") || !strings.HasSuffix(line, "'") {
			continue
		}
		i := strings.Index(line, "' is `")
		if i < 0 {
			continue
		}
		k, kerr := unprintable(line[1:i])
		v, verr := unprintable(line[i+len("' is `") : len(line)-1])
		if kerr == nil && verr == nil {
			res[k] = []byte(v)
		}
	}
	return res
}

// unprintable reverses fdbcli's printable(): \xHH is a byte, \\ a backslash.
func unprintable(s string) (string, error) {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			sb.WriteByte(s[i])
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '\\':
			sb.WriteByte('\\')
			i++
		case i+3 < len(s) && s[i+1] == 'x':
			n, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				return "", err
			}
			sb.WriteByte(byte(n))
			i += 3
		default:
			return "", fmt.Errorf("bad escape in %q", s)
		}
	}
	return sb.String(), nil
}

// PrintableKey shows a key or value as fdbcli does (non-printable bytes as \xHH).
func PrintableKey(k string) string { return printableKey(k) }

func printableKey(k string) string {
	var sb strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '\\':
			sb.WriteString(`\\`)
		case c < 32 || c > 126:
			fmt.Fprintf(&sb, `\x%02x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// strinc is the first key after every key starting with k.
func strinc(k string) string {
	b := []byte(strings.TrimRight(k, "\xff"))
	if len(b) == 0 {
		return "\xff"
	}
	b[len(b)-1]++
	return string(b)
}
