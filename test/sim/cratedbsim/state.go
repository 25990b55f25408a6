package cratedbsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// persisted is what Config.StateDir keeps across simulator restarts. Passwords are stored as
// hashes only.
type persisted struct {
	Users    []persistedUser   `json:"users"`
	License  bool              `json:"license"`
	Settings map[string]string `json:"settings,omitempty"`
	Tables   []persistedTable  `json:"tables,omitempty"`
}

type persistedUser struct {
	Name      string `json:"name"`
	PwHash    string `json:"pwHash,omitempty"`
	Superuser bool   `json:"superuser,omitempty"`
	// Privileges are class/ident/type/state/grantor, as sys.privileges lists them.
	Privileges []persistedPrivilege `json:"privileges,omitempty"`
}

type persistedPrivilege struct {
	Class   string `json:"class"`
	Ident   string `json:"ident,omitempty"`
	Type    string `json:"type"`
	State   string `json:"state"`
	Grantor string `json:"grantor"`
}

type persistedTable struct {
	Name     string `json:"name"`
	Shards   int    `json:"shards"`
	Replicas string `json:"replicas"`
	// Partitioned tables and partitions (partitions.go), allocation filters.
	PartitionedBy string            `json:"partitionedBy,omitempty"`
	Parent        string            `json:"parent,omitempty"`
	Value         string            `json:"value,omitempty"`
	Filters       map[string]string `json:"filters,omitempty"`
}

func (s *Sim) statePath() string { return filepath.Join(s.cfg.StateDir, "cratedb-sim-state.json") }

func (s *Sim) loadState() error {
	if s.cfg.StateDir == "" {
		return nil
	}
	data, err := os.ReadFile(s.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cratedbsim: read state: %w", err)
	}
	var st persisted
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("cratedbsim: decode state %s: %w", s.statePath(), err)
	}
	for _, u := range st.Users {
		usr := &user{name: u.Name, pwHash: u.PwHash, superuser: u.Superuser, privs: map[privKey]privEntry{}}
		for _, p := range u.Privileges {
			usr.privs[privKey{class: p.Class, ident: p.Ident, typ: p.Type}] = privEntry{state: p.State, grantor: p.Grantor}
		}
		s.m.users[u.Name] = usr
	}
	s.m.license = st.License
	// Only persistent settings survive a restart of the whole cluster.
	for k, v := range st.Settings {
		s.m.persistent[k] = v
	}
	for _, t := range st.Tables {
		// Where the data lives is not kept: primaries may start anywhere.
		tb := &table{name: t.Name, shards: t.Shards, replicas: t.Replicas, copies: make([][]*shardCopy, t.Shards), anywhere: true,
			partitionedBy: t.PartitionedBy, partitioned: t.PartitionedBy != "", parent: t.Parent, value: t.Value, filters: t.Filters}
		if tb.partitioned {
			tb.copies = nil
		}
		if tb.parent != "" {
			tb.ident = partitionIdent(tb.value)
		}
		s.m.tables[t.Name] = tb
	}
	return nil
}

func (s *Sim) saveStateLocked() error {
	if s.cfg.StateDir == "" {
		return nil
	}
	st := persisted{License: s.m.license, Settings: s.m.persistent}
	for _, u := range s.m.users {
		pu := persistedUser{Name: u.name, PwHash: u.pwHash, Superuser: u.superuser}
		for k, e := range u.privs {
			pu.Privileges = append(pu.Privileges, persistedPrivilege{Class: k.class, Ident: k.ident, Type: k.typ, State: e.state, Grantor: e.grantor})
		}
		st.Users = append(st.Users, pu)
	}
	for _, t := range s.m.sortedTables() {
		st.Tables = append(st.Tables, persistedTable{Name: t.name, Shards: t.shards, Replicas: t.replicas,
			PartitionedBy: t.partitionedBy, Parent: t.parent, Value: t.value, Filters: t.filters})
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if err := os.MkdirAll(s.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	tmp := s.statePath() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, s.statePath()); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}
