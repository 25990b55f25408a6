package cratedbsim

import "strings"

// Shard allocation awareness, after Elasticsearch's AwarenessAllocationDecider, which CrateDB
// keeps (docs/config/cluster.rst, cluster.routing.allocation.awareness.attributes; not a runtime
// setting there: every node is started with it, and the elected master's applies): for each
// awareness attribute, the copies of a shard (number_of_replicas + 1) spread over the values
// the data nodes of the cluster have for it (excluded nodes count: they are still in the
// cluster), at most ceil(copies / values) per value; a node without the attribute takes no
// copy. A relocation does not count its source. Forced awareness is not modelled. Node
// attributes are the -Cnode.attr.<name> settings, shown in sys.nodes.attributes.

const settingAwarenessAttributes = "cluster.routing.allocation.awareness.attributes"

// attributes are the node's custom attributes (node.attr.*), as sys.nodes.attributes shows them.
func (n *simNode) attributes() map[string]any {
	out := map[string]any{}
	for k, v := range n.settings {
		if a, ok := strings.CutPrefix(k, "node.attr."); ok {
			out[a] = v
		}
	}
	return out
}

func (n *simNode) attr(name string) (string, bool) {
	v, ok := n.settings["node.attr."+name]
	return v, ok
}

// awarenessAllows says whether n may take another copy of the shard whose copies are given;
// from is the node a relocation moves the copy off ("" for a new copy).
func (m *model) awarenessAllows(t *table, copies []*shardCopy, n *simNode, from string) bool {
	var attrs []string
	for _, a := range strings.Split(m.awarenessSetting(), ",") {
		if a = strings.TrimSpace(a); a != "" {
			attrs = append(attrs, a)
		}
	}
	if len(attrs) == 0 {
		return true
	}
	shardCount := desiredReplicas(t.replicas, m.eligibleCount()) + 1
	for _, a := range attrs {
		v, ok := n.attr(a)
		if !ok {
			return false
		}
		values := map[string]bool{}
		for _, x := range m.nodes {
			if xv, ok := x.attr(a); ok && x.up && x.data {
				values[xv] = true
			}
		}
		count := 0
		for _, c := range copies {
			if c.node == from {
				continue
			}
			if x := m.nodes[c.node]; x != nil {
				if xv, ok := x.attr(a); ok && xv == v {
					count++
				}
			}
		}
		k := max(len(values), 1)
		perValue := (shardCount + k - 1) / k
		if count+1 > perValue {
			return false
		}
	}
	return true
}

// awarenessSetting is the elected master's awareness attributes ("" without a master).
func (m *model) awarenessSetting() string {
	if n := m.nodes[m.master]; n != nil {
		return n.settings[settingAwarenessAttributes]
	}
	return ""
}
