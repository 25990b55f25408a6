package cratedbsim

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// pgStatement is a prepared statement of one connection.
type pgStatement struct {
	sql  string
	plan *plan
}

type pgPortal struct {
	stmt    *pgStatement
	args    []any
	formats []int16
}

// pgConn is the server side of one PostgreSQL wire protocol connection.
type pgConn struct {
	sim     *Sim
	conn    net.Conn
	node    string
	user    string
	be      *pgproto3.Backend
	types   *pgtype.Map
	stmts   map[string]*pgStatement
	portals map[string]*pgPortal
}

// servePG speaks the PostgreSQL protocol on conn until the client leaves or the node stops.
func (s *Sim) servePG(node string, conn net.Conn) {
	c := &pgConn{
		sim:     s,
		node:    node,
		be:      pgproto3.NewBackend(conn, conn),
		types:   pgtype.NewMap(),
		stmts:   map[string]*pgStatement{},
		portals: map[string]*pgPortal{},
	}
	if err := c.startup(conn); err != nil {
		if errors.Is(err, io.EOF) {
			return // e.g. pgx giving up on TLS to reconnect in plain text
		}
		s.logf("cratedbsim: pg %s: startup: %v", node, err)
		return
	}
	if err := c.loop(); err != nil && !errors.Is(err, net.ErrClosed) {
		s.logf("cratedbsim: pg %s: %v", node, err)
	}
}

func (c *pgConn) startup(conn net.Conn) error {
	tlsOn := false
	settings := c.sim.nodeSettingsOf(c.node)
	for {
		msg, err := c.be.ReceiveStartupMessage()
		if err != nil {
			return err
		}
		switch msg := msg.(type) {
		case *pgproto3.SSLRequest:
			if tlsOn || !settings.bool("ssl.psql.enabled", false) || c.sim.cfg.TLS == nil {
				// No TLS: the client continues in plain text (sslmode=prefer) or gives up.
				if _, err := conn.Write([]byte{'N'}); err != nil {
					return err
				}
				continue
			}
			if _, err := conn.Write([]byte{'S'}); err != nil {
				return err
			}
			tc := tls.Server(conn, c.sim.cfg.TLS)
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("tls handshake: %w", err)
			}
			conn, tlsOn = tc, true
			c.conn = tc
			c.be = pgproto3.NewBackend(tc, tc)
			continue
		case *pgproto3.GSSEncRequest:
			if _, err := conn.Write([]byte{'N'}); err != nil {
				return err
			}
			continue
		case *pgproto3.CancelRequest:
			return errors.New("cancel requests are not supported")
		case *pgproto3.StartupMessage:
			c.user = msg.Parameters["user"]
		default:
			return fmt.Errorf("unexpected startup message %T", msg)
		}
		break
	}
	ci := connInfo{protocol: "pg", remote: remoteIP(conn.RemoteAddr().String()), tls: tlsOn, user: c.user}
	needs, err := c.sim.login(c.node, ci, "", false)
	if err != nil {
		return c.fatal(err)
	}
	if needs {
		c.be.Send(&pgproto3.AuthenticationCleartextPassword{})
		if err := c.be.Flush(); err != nil {
			return err
		}
		if err := c.be.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
			return err
		}
		msg, err := c.be.Receive()
		if err != nil {
			return err
		}
		pw, ok := msg.(*pgproto3.PasswordMessage)
		if !ok {
			return fmt.Errorf("expected a password message, got %T", msg)
		}
		if _, err := c.sim.login(c.node, ci, pw.Password, true); err != nil {
			return c.fatal(err)
		}
	}
	c.be.Send(&pgproto3.AuthenticationOk{})
	for k, v := range map[string]string{
		"server_version":              "14.0",
		"server_encoding":             "UTF8",
		"client_encoding":             "UTF8",
		"DateStyle":                   "ISO",
		"TimeZone":                    "UTC",
		"integer_datetimes":           "on",
		"standard_conforming_strings": "on",
		"crate_version":               c.sim.versionString(c.node),
	} {
		c.be.Send(&pgproto3.ParameterStatus{Name: k, Value: v})
	}
	var key [8]byte
	_, _ = rand.Read(key[:])
	c.be.Send(&pgproto3.BackendKeyData{ProcessID: binary.BigEndian.Uint32(key[:4]) >> 1, SecretKey: key[4:]})
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return c.be.Flush()
}

// fatal reports err to the client and ends the connection.
func (c *pgConn) fatal(err error) error {
	c.be.Send(errorResponse(err, "FATAL"))
	_ = c.be.Flush()
	return err
}

func errorResponse(err error, severity string) *pgproto3.ErrorResponse {
	var se *SQLError
	if !errors.As(err, &se) {
		se = &SQLError{SQLState: "XX000", Message: err.Error()}
	}
	return &pgproto3.ErrorResponse{Severity: severity, SeverityUnlocalized: severity, Code: se.SQLState, Message: se.Message}
}

func (c *pgConn) loop() error {
	// After an error in the extended protocol, messages are ignored until Sync.
	skipToSync := false
	for {
		msg, err := c.be.Receive()
		if err != nil {
			return err
		}
		if skipToSync {
			switch msg.(type) {
			case *pgproto3.Sync:
				skipToSync = false
			case *pgproto3.Terminate:
				return nil
			default:
				continue
			}
		}
		var stepErr error
		switch msg := msg.(type) {
		case *pgproto3.Query:
			c.simpleQuery(msg.String)
			c.be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if err := c.be.Flush(); err != nil {
				return err
			}
			continue
		case *pgproto3.Parse:
			stepErr = c.parse(msg)
		case *pgproto3.Bind:
			stepErr = c.bind(msg)
		case *pgproto3.Describe:
			stepErr = c.describe(msg)
		case *pgproto3.Execute:
			stepErr = c.execute(msg)
		case *pgproto3.Close:
			if msg.ObjectType == 'S' {
				delete(c.stmts, msg.Name)
			} else {
				delete(c.portals, msg.Name)
			}
			c.be.Send(&pgproto3.CloseComplete{})
		case *pgproto3.Sync:
			// Unnamed portals do not outlive the transaction.
			delete(c.portals, "")
			c.be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if err := c.be.Flush(); err != nil {
				return err
			}
			continue
		case *pgproto3.Flush:
			if err := c.be.Flush(); err != nil {
				return err
			}
			continue
		case *pgproto3.Terminate:
			return nil
		default:
			stepErr = &SQLError{SQLState: "0A000", Message: fmt.Sprintf("UnsupportedFeatureException[message %T is not supported]", msg)}
		}
		if stepErr != nil {
			c.be.Send(errorResponse(stepErr, "ERROR"))
			skipToSync = true
			if err := c.be.Flush(); err != nil {
				return err
			}
		}
	}
}

func (c *pgConn) simpleQuery(sql string) {
	parts := splitStatements(sql)
	if len(parts) == 0 {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return
	}
	for _, part := range parts {
		p, err := c.sim.stmts.prepare(part)
		if err == nil && len(p.params) > 0 {
			err = errParse("no value given for parameter $1")
		}
		if err != nil {
			c.sim.record(c.node, c.user, "pg", part, err)
			c.be.Send(errorResponse(err, "ERROR"))
			return
		}
		res, err := c.sim.execute(c.node, c.user, "pg", part, p, nil)
		if err != nil {
			c.be.Send(errorResponse(err, "ERROR"))
			return
		}
		if res.cols != nil {
			c.be.Send(rowDescription(res.cols, nil))
		}
		if err := c.sendRows(res, nil); err != nil {
			c.be.Send(errorResponse(err, "ERROR"))
			return
		}
		c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(res.tag())})
	}
}

func (c *pgConn) parse(msg *pgproto3.Parse) error {
	p, err := c.sim.stmts.prepare(msg.Query)
	if err != nil {
		c.sim.record(c.node, c.user, "pg", msg.Query, err)
		return err
	}
	c.stmts[msg.Name] = &pgStatement{sql: msg.Query, plan: p}
	c.be.Send(&pgproto3.ParseComplete{})
	return nil
}

func formatFor(formats []int16, i int) int16 {
	switch len(formats) {
	case 0:
		return pgtype.TextFormatCode
	case 1:
		return formats[0]
	}
	if i < len(formats) {
		return formats[i]
	}
	return pgtype.TextFormatCode
}

func (c *pgConn) bind(msg *pgproto3.Bind) error {
	st := c.stmts[msg.PreparedStatement]
	if st == nil {
		return &SQLError{SQLState: "26000", Message: fmt.Sprintf("prepared statement %q does not exist", msg.PreparedStatement)}
	}
	if len(msg.Parameters) != len(st.plan.params) {
		return errIllegal("bind message supplies %d parameters, but the statement requires %d", len(msg.Parameters), len(st.plan.params))
	}
	args := make([]any, len(msg.Parameters))
	for i, raw := range msg.Parameters {
		if raw == nil {
			continue
		}
		v, err := c.decodeParam(st.plan.params[i], formatFor(msg.ParameterFormatCodes, i), raw)
		if err != nil {
			return errIllegal("cannot decode parameter $%d: %v", i+1, err)
		}
		args[i] = v
	}
	c.portals[msg.DestinationPortal] = &pgPortal{stmt: st, args: args, formats: msg.ResultFormatCodes}
	c.be.Send(&pgproto3.BindComplete{})
	return nil
}

func (c *pgConn) decodeParam(oid uint32, format int16, raw []byte) (any, error) {
	switch oid {
	case oidTextArray:
		var v []string
		err := c.types.Scan(oid, format, raw, &v)
		return v, err
	case oidBool:
		var v bool
		err := c.types.Scan(oid, format, raw, &v)
		return v, err
	case oidInt8:
		var v int64
		err := c.types.Scan(oid, format, raw, &v)
		return v, err
	default:
		var v string
		err := c.types.Scan(oidText, format, raw, &v)
		return v, err
	}
}

func (c *pgConn) describe(msg *pgproto3.Describe) error {
	var p *plan
	var formats []int16
	if msg.ObjectType == 'S' {
		st := c.stmts[msg.Name]
		if st == nil {
			return &SQLError{SQLState: "26000", Message: fmt.Sprintf("prepared statement %q does not exist", msg.Name)}
		}
		p = st.plan
		c.be.Send(&pgproto3.ParameterDescription{ParameterOIDs: p.params})
	} else {
		portal := c.portals[msg.Name]
		if portal == nil {
			return &SQLError{SQLState: "34000", Message: fmt.Sprintf("portal %q does not exist", msg.Name)}
		}
		p, formats = portal.stmt.plan, portal.formats
	}
	if p.cols == nil {
		c.be.Send(&pgproto3.NoData{})
		return nil
	}
	c.be.Send(rowDescription(p.cols, formats))
	return nil
}

func (c *pgConn) execute(msg *pgproto3.Execute) error {
	portal := c.portals[msg.Portal]
	if portal == nil {
		return &SQLError{SQLState: "34000", Message: fmt.Sprintf("portal %q does not exist", msg.Portal)}
	}
	res, err := c.sim.execute(c.node, c.user, "pg", portal.stmt.sql, portal.stmt.plan, portal.args)
	if err != nil {
		return err
	}
	if err := c.sendRows(res, portal.formats); err != nil {
		return err
	}
	c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(res.tag())})
	return nil
}

func typeSize(oid uint32) int16 {
	switch oid {
	case oidBool:
		return 1
	case oidInt2:
		return 2
	case oidInt4:
		return 4
	case oidInt8:
		return 8
	}
	return -1
}

func rowDescription(cols []column, formats []int16) *pgproto3.RowDescription {
	rd := &pgproto3.RowDescription{}
	for i, col := range cols {
		rd.Fields = append(rd.Fields, pgproto3.FieldDescription{
			Name:         []byte(col.name),
			DataTypeOID:  col.oid,
			DataTypeSize: typeSize(col.oid),
			TypeModifier: -1,
			Format:       formatFor(formats, i),
		})
	}
	return rd
}

func (c *pgConn) sendRows(res *result, formats []int16) error {
	for _, row := range res.rows {
		values := make([][]byte, len(row))
		for i, v := range row {
			if v == nil {
				continue
			}
			buf, err := c.types.Encode(res.cols[i].oid, formatFor(formats, i), v, []byte{})
			if err != nil {
				return fmt.Errorf("encode column %s: %w", res.cols[i].name, err)
			}
			values[i] = buf
		}
		c.be.Send(&pgproto3.DataRow{Values: values})
	}
	return nil
}
