package testbed

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// auditPolicy records every request at Metadata level: who, what verb on which object, and
// the full request URI. Exec and attach requests carry their argv in the URI's query
// (?command=...), so this is where a secret passed as an exec argument would show up on a
// real cluster. Request and response bodies are not recorded (Metadata level), so Secrets
// created by the tests themselves do not appear. RequestReceived is omitted: every request
// also has a later stage with the same metadata.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// auditFlags writes the audit policy into the testbed folder and returns the kube-apiserver
// flags that enable the log backend. The log backend blocks each request until its event is
// written (the default "blocking" mode), so an event is in the file when the client sees the
// response.
func (tb *Testbed) auditFlags() ([]string, error) {
	policyPath := filepath.Join(tb.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policyPath, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("write audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policyPath,
		"--audit-log-path=" + tb.AuditLogPath(),
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		// One file for the whole (short) life of a testbed: no rotation to miss events in.
		"--audit-log-maxsize=0",
	}, nil
}

// AuditLogPath is the kube-apiserver's audit log: one JSON audit.k8s.io/v1 Event per line.
func (tb *Testbed) AuditLogPath() string {
	return filepath.Join(tb.LogDir, "audit.log")
}

// AuditEvent holds the fields of an audit.k8s.io/v1 Event that tests look at.
type AuditEvent struct {
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	// UserAgent tells the clients apart: every component of the test bed and the plugin
	// authenticate as the same admin user.
	UserAgent string `json:"userAgent"`
	// RequestReceived is when the API server received the request.
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	User            struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// Raw is the whole line as written by the API server.
	Raw []byte `json:"-"`
}

// AuditEvents reads and parses the audit log written so far.
func (tb *Testbed) AuditEvents() ([]AuditEvent, error) {
	data, err := os.ReadFile(tb.AuditLogPath())
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	// The API server may be in the middle of writing the last line: only complete lines count.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var events []AuditEvent
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var ev AuditEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", line, err)
		}
		ev.Raw = append([]byte(nil), raw...)
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return events, nil
}
