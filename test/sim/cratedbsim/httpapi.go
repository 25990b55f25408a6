package cratedbsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// SQLRequest is the body of CrateDB's POST /_sql.
type SQLRequest struct {
	Stmt string `json:"stmt"`
	Args []any  `json:"args,omitempty"`
}

// SQLResponse is a successful answer of POST /_sql.
type SQLResponse struct {
	Cols     []string `json:"cols"`
	ColTypes []int    `json:"col_types,omitempty"`
	Rows     [][]any  `json:"rows"`
	RowCount int64    `json:"rowcount"`
	Duration float64  `json:"duration"`
}

// SQLErrorResponse is a failed answer of POST /_sql.
type SQLErrorResponse struct {
	Error struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	} `json:"error"`
}

// CrateDB's HTTP column type ids for the OIDs we use.
func crateTypeID(oid uint32) int {
	switch oid {
	case oidBool:
		return 3
	case oidInt2:
		return 8
	case oidInt4:
		return 9
	case oidInt8:
		return 10
	case oidTextArray:
		return 100
	case oidJSON:
		return 12 // object
	}
	return 4
}

// httpHandler serves a node's HTTP endpoint (node "" is the debug listener, without /_sql).
func (s *Sim) httpHandler(node string) http.Handler {
	mux := http.NewServeMux()
	if node != "" {
		mux.HandleFunc("POST /_sql", func(w http.ResponseWriter, r *http.Request) { s.serveSQL(node, w, r) })
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
			if _, ok := s.httpLogin(node, w, r); !ok {
				return
			}
			s.mu.Lock()
			v := s.versionOfLocked(node)
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"ok": true, "status": 200, "name": node, "cluster_name": "crate",
				"version": map[string]any{"number": v.String()}})
		})
	}
	mux.HandleFunc("GET /_sim/statements", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Statements())
	})
	mux.HandleFunc("GET /_sim/nodes", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Nodes())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeSQLError(w http.ResponseWriter, err error) {
	var se *SQLError
	if !errors.As(err, &se) {
		se = &SQLError{HTTPStatus: http.StatusInternalServerError, Code: 5000, Message: err.Error()}
	}
	var body SQLErrorResponse
	body.Error.Message, body.Error.Code = se.Message, se.Code
	writeJSON(w, se.HTTPStatus, body)
}

func (s *Sim) serveSQL(node string, w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	user, ok := s.httpLogin(node, w, r)
	if !ok {
		return
	}
	var req SQLRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeSQLError(w, errParse("invalid request body: %v", err))
		return
	}
	p, err := s.stmts.prepare(req.Stmt)
	if err != nil {
		s.record(node, user, "http", req.Stmt, err)
		writeSQLError(w, err)
		return
	}
	args, err := jsonArgs(p.params, req.Args)
	if err != nil {
		s.record(node, user, "http", req.Stmt, err)
		writeSQLError(w, err)
		return
	}
	res, err := s.execute(node, user, "http", req.Stmt, p, args)
	if err != nil {
		writeSQLError(w, err)
		return
	}
	out := SQLResponse{Cols: []string{}, Rows: [][]any{}, RowCount: res.rowcount}
	for _, c := range res.cols {
		out.Cols = append(out.Cols, c.name)
		out.ColTypes = append(out.ColTypes, crateTypeID(c.oid))
	}
	if res.verb == "SELECT" {
		out.Rows = append(out.Rows, res.rows...)
		out.RowCount = int64(len(res.rows))
	}
	out.Duration = float64(time.Since(began).Microseconds()) / 1000
	writeJSON(w, http.StatusOK, out)
}

// httpLogin authenticates an HTTP request as CrateDB does for every request: basic auth, or
// auth.trust.http_default_user (default crate) without an Authorization header. On failure
// it answers 401 with the reason as plain text (HttpAuthUpstreamHandler) and ok is false.
func (s *Sim) httpLogin(node string, w http.ResponseWriter, r *http.Request) (user string, ok bool) {
	user, password, given := r.BasicAuth()
	if !given {
		user = s.nodeSettingsOf(node)["auth.trust.http_default_user"]
		if user == "" {
			user = "crate"
		}
	}
	ci := connInfo{protocol: "http", remote: remoteIP(r.RemoteAddr), tls: r.TLS != nil, user: user}
	needs, err := s.login(node, ci, password, given)
	if err == nil && needs && !given {
		err = errAuth(user)
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="CrateDB Authenticator"`)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, err.Error()+"\n")
		return "", false
	}
	return user, true
}

// jsonArgs converts JSON arguments to the types the statement's parameters expect.
func jsonArgs(types []uint32, in []any) ([]any, error) {
	if len(in) < len(types) {
		return nil, errIllegal("statement requires %d arguments, got %d", len(types), len(in))
	}
	out := make([]any, len(in))
	for i, v := range in {
		if v == nil || i >= len(types) {
			out[i] = v
			continue
		}
		switch types[i] {
		case oidTextArray:
			list, ok := v.([]any)
			if !ok {
				return nil, errIllegal("argument %d must be an array", i+1)
			}
			strs := make([]string, len(list))
			for k, e := range list {
				strs[k] = fmt.Sprint(e)
			}
			out[i] = strs
		case oidBool:
			b, ok := v.(bool)
			if !ok {
				return nil, errIllegal("argument %d must be a boolean", i+1)
			}
			out[i] = b
		case oidInt8:
			f, ok := v.(float64)
			if !ok {
				return nil, errIllegal("argument %d must be a number", i+1)
			}
			out[i] = int64(f)
		default:
			if str, ok := v.(string); ok {
				out[i] = str
			} else {
				out[i] = fmt.Sprint(v)
			}
		}
	}
	return out, nil
}
