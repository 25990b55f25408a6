package cratedb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-dbops/kubectl-dbops/internal/kube"
	"github.com/kubectl-dbops/kubectl-dbops/internal/ops"
)

// DB is the part of a PostgreSQL wire connection the procedures use.
// Query returns all rows, decoded to Go values (int64, int32, string,
// bool, nil...): result sets here are a handful of rows.
type DB interface {
	Query(ctx context.Context, sql string, args ...any) ([][]any, error)
	Exec(ctx context.Context, sql string, args ...any) error
	// Alive is false once the connection (or its port-forward) is gone,
	// so the caller knows to reconnect instead of failing.
	Alive() bool
	Close(ctx context.Context) error
}

// Credentials are what a connection logs in with.
type Credentials struct {
	User     string
	Password string
}

// Connector opens database connections to a cluster.
type Connector interface {
	// Connect opens a connection to a Ready pod of c, never to one named
	// in avoid. It returns the pod it reached ("" when not through a pod).
	Connect(ctx context.Context, c *ops.Cluster, creds Credentials, avoid []string) (DB, string, error)
}

// SSLModes lists the accepted --pg-sslmode values: auto (from the
// StatefulSet's -Cssl.psql.enabled) and libpq's verifying ones.
func SSLModes() []string { return []string{"auto", "disable", "require", "verify-ca", "verify-full"} }

// PGConnector connects over pgx, through a port-forward to port 5432 of a
// pod, or directly to Host:Port when Host is set (inside the cluster).
type PGConnector struct {
	Client     kubernetes.Interface
	RestConfig *rest.Config
	Host       string
	Port       int
	SSLMode    string
	// CA is the --pg-ca-secret reference (zero = system roots).
	CA SecretRef
	// ConnectTimeout bounds one connection attempt (default 15s).
	ConnectTimeout time.Duration
}

// Connect implements Connector.
func (p *PGConnector) Connect(ctx context.Context, c *ops.Cluster, creds Credentials, avoid []string) (DB, string, error) {
	tlsCfg, err := p.tlsConfig(ctx, c)
	if err != nil {
		return nil, "", err
	}
	// The pod's PostgreSQL port, as its StatefulSet declares it.
	pgPort, _ := ClusterTLS(c)
	if p.Host != "" {
		port := p.Port
		if port == 0 {
			port = pgPort
		}
		db, err := p.open(ctx, p.Host, port, creds, tlsCfg, p.Host, nil)
		return db, "", err
	}
	if p.RestConfig == nil {
		return nil, "", errors.New("no Kubernetes REST config to port-forward with; give --pg-host")
	}
	var errs []error
	for _, pod := range candidatePods(c, avoid) {
		// Inside a step the run's pod informer, carried by ctx: no request.
		live, err := ops.GetPod(ctx, nil, p.Client, c.Namespace, pod)
		if err != nil || !ops.PodReady(live) {
			continue
		}
		// The forward lives as long as the connection; its own context
		// is not the caller's, which may be a single step's.
		fwd, err := kube.PortForward(context.WithoutCancel(ctx), p.RestConfig, c.Namespace, pod, pgPort)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		host, portS, _ := net.SplitHostPort(fwd.LocalAddr())
		port, _ := strconv.Atoi(portS)
		db, err := p.open(ctx, host, port, creds, tlsCfg, serviceName(c), fwd)
		if err != nil {
			_ = fwd.Close()
			errs = append(errs, fmt.Errorf("pod %s: %w", pod, err))
			continue
		}
		return db, pod, nil
	}
	if len(errs) == 0 {
		return nil, "", ops.Preconditionf("no Ready CrateDB pod of %s/%s to connect to (excluding %v)", c.Namespace, c.Name, avoid)
	}
	return nil, "", fmt.Errorf("connecting to CrateDB %s/%s: %w", c.Namespace, c.Name, errors.Join(errs...))
}

// serviceName is the name verify-full checks through a port-forward: the
// CrateDB operator's client Service.
func serviceName(c *ops.Cluster) string {
	return "crate-" + c.Name + "." + c.Namespace + ".svc"
}

// candidatePods orders the pods to try: master-eligible ones first (they
// are never scaled away), then the rest in procedure order.
func candidatePods(c *ops.Cluster, avoid []string) []string {
	var first, rest []string
	for _, g := range c.Groups {
		for _, p := range g.Pods {
			if slices.Contains(avoid, p.Name) {
				continue
			}
			if g.MasterEligible || g.Role == ops.RoleMaster {
				first = append(first, p.Name)
			} else {
				rest = append(rest, p.Name)
			}
		}
	}
	return append(first, rest...)
}

func (p *PGConnector) tlsConfig(ctx context.Context, c *ops.Cluster) (*tls.Config, error) {
	mode := p.SSLMode
	if mode == "" || mode == "auto" {
		// What the cluster serves: TLS when -Cssl.psql.enabled, checked
		// against the CA when one is given.
		mode = "disable"
		if _, tlsOn := ClusterTLS(c); tlsOn {
			mode = "require"
			if !p.CA.IsZero() {
				mode = "verify-ca"
			}
		}
	}
	if mode == "disable" {
		return nil, nil
	}
	var pool *x509.CertPool
	if !p.CA.IsZero() {
		pem, err := readSecret(ctx, p.Client, c.Namespace, p.CA, "--pg-ca-secret")
		if err != nil {
			return nil, err
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(pem)) {
			return nil, ops.Usagef("--pg-ca-secret %s: no PEM certificate found", p.CA)
		}
	}
	switch mode {
	case "require":
		return &tls.Config{InsecureSkipVerify: true}, nil //nolint:gosec // sslmode=require does not verify, by definition
	case "verify-ca":
		// Verify the chain but not the host name, like libpq.
		return &tls.Config{InsecureSkipVerify: true, //nolint:gosec // the chain is verified below
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				return verifyChain(raw, pool)
			}}, nil
	case "verify-full":
		return &tls.Config{RootCAs: pool}, nil
	default:
		return nil, ops.Usagef("unknown --pg-sslmode %q; allowed: auto, disable, require, verify-ca, verify-full", mode)
	}
}

func verifyChain(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("server sent no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return fmt.Errorf("parsing server certificate: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	return err
}

func (p *PGConnector) open(ctx context.Context, host string, port int, creds Credentials, tlsCfg *tls.Config, serverName string, fwd *kube.Forward) (DB, error) {
	// Built field by field, never from a connection string, so the
	// password cannot end up in a parse error.
	cfg, err := pgx.ParseConfig("sslmode=disable")
	if err != nil {
		return nil, fmt.Errorf("pgx config: %w", err)
	}
	cfg.Host = host
	cfg.Port = uint16(port) //nolint:gosec // validated flag range
	cfg.User = creds.User
	cfg.Password = creds.Password
	cfg.Database = "doc"
	cfg.ConnectTimeout = p.ConnectTimeout
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 15 * time.Second
	}
	if tlsCfg != nil {
		t := tlsCfg.Clone()
		if t.ServerName == "" && !t.InsecureSkipVerify {
			t.ServerName = serverName
		}
		cfg.TLSConfig = t
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting as %s: %w", creds.User, redactErr(err, creds.Password))
	}
	return &pgxDB{conn: conn, fwd: fwd, secret: creds.Password}, nil
}

// pgxDB adapts a pgx connection (and the port-forward under it).
type pgxDB struct {
	conn   *pgx.Conn
	fwd    *kube.Forward
	secret string
}

func (d *pgxDB) Query(ctx context.Context, sql string, args ...any) ([][]any, error) {
	rows, err := d.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, d.wrap(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, d.wrap(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap(err)
	}
	return out, nil
}

func (d *pgxDB) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := d.conn.Exec(ctx, sql, args...)
	return d.wrap(err)
}

func (d *pgxDB) Alive() bool {
	if d.conn.IsClosed() {
		return false
	}
	if d.fwd != nil {
		select {
		case <-d.fwd.Done():
			return false
		default:
		}
	}
	return true
}

func (d *pgxDB) Close(ctx context.Context) error {
	err := d.conn.Close(ctx)
	if d.fwd != nil {
		_ = d.fwd.Close()
	}
	return err
}

// wrap keeps driver errors free of the session's password (a server may
// echo a statement).
func (d *pgxDB) wrap(err error) error {
	if err == nil {
		return nil
	}
	return redactErr(err, d.secret)
}

// session is the engine's connection as the system user. It reconnects,
// to another pod, when the connection's pod is about to go or went away.
type session struct {
	connector Connector
	creds     func(ctx context.Context) (Credentials, error)
	cluster   *ops.Cluster
	// timeout bounds one statement: a connection whose pod went away
	// (a port-forward that stalls instead of failing) must not hang a
	// wait forever. pgx closes a connection whose query was cancelled,
	// so the retry below reconnects.
	timeout time.Duration

	// statements counts the statements sent (every attempt), for the per-pod report.
	statements atomic.Int64

	mu  sync.Mutex
	db  DB
	pod string
}

// get returns a live connection not going through any pod in avoid.
func (s *session) get(ctx context.Context, avoid []string) (DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db != nil && (!s.db.Alive() || (s.pod != "" && slices.Contains(avoid, s.pod))) {
		_ = s.db.Close(context.WithoutCancel(ctx))
		s.db, s.pod = nil, ""
	}
	if s.db != nil {
		return s.db, nil
	}
	creds, err := s.creds(ctx)
	if err != nil {
		return nil, err
	}
	db, pod, err := s.connector.Connect(ctx, s.cluster, creds, avoid)
	if err != nil {
		return nil, err
	}
	s.db, s.pod = db, pod
	return db, nil
}

// retry runs f on a connection; when it fails because the connection
// died (its pod restarted), f runs once more on a new connection. Every
// statement the procedures send is idempotent, so this is safe.
func (s *session) retry(ctx context.Context, avoid []string, f func(DB) error) error {
	db, err := s.get(ctx, avoid)
	if err != nil {
		return err
	}
	err = s.bounded(ctx, db, f)
	if err == nil || db.Alive() || ctx.Err() != nil {
		return err
	}
	if db, err = s.get(ctx, avoid); err != nil {
		return err
	}
	return s.bounded(ctx, db, f)
}

// bounded runs f with the statement timeout; a timed-out connection is
// closed so the next attempt opens a new one.
func (s *session) bounded(ctx context.Context, db DB, f func(DB) error) error {
	if s.timeout <= 0 {
		return f(db)
	}
	qctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := f(&ctxDB{DB: db, ctx: qctx})
	if err != nil && ctx.Err() == nil && qctx.Err() != nil {
		s.mu.Lock()
		if s.db == db {
			_ = db.Close(context.WithoutCancel(ctx))
			s.db, s.pod = nil, ""
		}
		s.mu.Unlock()
		return fmt.Errorf("no answer within %s: %w", s.timeout, err)
	}
	return err
}

// ctxDB runs every call with its own context (the statement timeout).
type ctxDB struct {
	DB
	ctx context.Context
}

func (d *ctxDB) Query(_ context.Context, sql string, args ...any) ([][]any, error) {
	return d.DB.Query(d.ctx, sql, args...)
}

func (d *ctxDB) Exec(_ context.Context, sql string, args ...any) error {
	return d.DB.Exec(d.ctx, sql, args...)
}

func (s *session) query(ctx context.Context, avoid []string, sql string, args ...any) ([][]any, error) {
	var rows [][]any
	err := s.retry(ctx, avoid, func(db DB) error {
		var err error
		s.statements.Add(1)
		rows, err = db.Query(ctx, sql, args...)
		return err
	})
	return rows, err
}

// exec sends a statement that changes the cluster (every statement the procedures exec does:
// SET/RESET GLOBAL, node check acknowledgements, users and grants), so each attempt first asks
// the write guard: a run that lost its lock sends none.
func (s *session) exec(ctx context.Context, avoid []string, sql string, args ...any) error {
	return s.retry(ctx, avoid, func(db DB) error {
		if err := kube.CheckWriteGuard(ctx); err != nil {
			return fmt.Errorf("not sending %s: %w", statementVerb(sql), err)
		}
		s.statements.Add(1)
		return db.Exec(ctx, sql, args...)
	})
}

// statementVerb is the first words of sql, enough to name it in a refusal without quoting a
// value it may carry.
func statementVerb(sql string) string {
	f := strings.Fields(sql)
	return strings.Join(f[:min(len(f), 2)], " ")
}

func (s *session) close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close(ctx)
	s.db, s.pod = nil, ""
	return err
}
