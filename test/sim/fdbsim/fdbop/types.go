package fdbop

import "strings"

// The subset of apps.foundationdb.org/v1beta2 FoundationDBCluster this stand-in reads and
// writes, with the JSON names of FoundationDB/fdb-kubernetes-operator
// api/v1beta2/foundationdbcluster_types.go (the operator's Go module is not imported: it pulls
// in the FDB client bindings).

type clusterSpec struct {
	Version              string         `json:"version"`
	Skip                 bool           `json:"skip,omitempty"`
	ProcessGroupIDPrefix string         `json:"processGroupIDPrefix,omitempty"`
	ProcessCounts        map[string]int `json:"processCounts,omitempty"`
	// ProcessGroupsToRemove and ProcessGroupsToRemoveWithoutExclusion name process groups to
	// remove (the latter without excluding them first).
	ProcessGroupsToRemove                 []string `json:"processGroupsToRemove,omitempty"`
	ProcessGroupsToRemoveWithoutExclusion []string `json:"processGroupsToRemoveWithoutExclusion,omitempty"`
	DatabaseConfiguration                 struct {
		RedundancyMode string `json:"redundancy_mode,omitempty"`
		UsableRegions  int    `json:"usable_regions,omitempty"`
		// RoleCounts (api/v1beta2 foundationdb_database_configuration.go), inlined.
		Storage       int `json:"storage,omitempty"`
		Logs          int `json:"logs,omitempty"`
		Proxies       int `json:"proxies,omitempty"`
		CommitProxies int `json:"commit_proxies,omitempty"`
		GrvProxies    int `json:"grv_proxies,omitempty"`
		Resolvers     int `json:"resolvers,omitempty"`
		LogRouters    int `json:"log_routers,omitempty"`
		RemoteLogs    int `json:"remote_logs,omitempty"`
	} `json:"databaseConfiguration,omitempty"`
	FaultDomain struct {
		Key       string `json:"key,omitempty"`
		Value     string `json:"value,omitempty"`
		ValueFrom string `json:"valueFrom,omitempty"`
	} `json:"faultDomain,omitempty"`
	Labels struct {
		MatchLabels          map[string]string `json:"matchLabels,omitempty"`
		ResourceLabels       map[string]string `json:"resourceLabels,omitempty"`
		ProcessGroupIDLabels []string          `json:"processGroupIDLabels,omitempty"`
		ProcessClassLabels   []string          `json:"processClassLabels,omitempty"`
	} `json:"labels,omitempty"`
	// Routing: spec.routing.useDNSInClusterFile and dnsDomain (api/v1beta2
	// foundationdbcluster_types.go RoutingConfig).
	Routing struct {
		UseDNSInClusterFile *bool   `json:"useDNSInClusterFile,omitempty"`
		DNSDomain           *string `json:"dnsDomain,omitempty"`
	} `json:"routing,omitempty"`
	MainContainer struct {
		EnableTLS bool `json:"enableTls,omitempty"` // the operator's spelling (api/v1beta2 foundationdbcluster_types.go)
	} `json:"mainContainer,omitempty"`
}

type processGroupCondition struct {
	Type      string `json:"type,omitempty"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

type processGroupStatus struct {
	ProcessGroupID         string                   `json:"processGroupID,omitempty"`
	ProcessClass           string                   `json:"processClass,omitempty"`
	Addresses              []string                 `json:"addresses,omitempty"`
	RemovalTimestamp       *string                  `json:"removalTimestamp,omitempty"`
	ExclusionTimestamp     *string                  `json:"exclusionTimestamp,omitempty"`
	ExclusionSkipped       bool                     `json:"exclusionSkipped,omitempty"`
	FaultDomain            string                   `json:"faultDomain,omitempty"`
	ProcessGroupConditions []*processGroupCondition `json:"processGroupConditions,omitempty"`
}

type clusterStatus struct {
	ProcessGroups []*processGroupStatus `json:"processGroups,omitempty"`
	Generations   map[string]int64      `json:"generations,omitempty"`
	Health        struct {
		Available            bool `json:"available,omitempty"`
		Healthy              bool `json:"healthy,omitempty"`
		FullReplication      bool `json:"fullReplication,omitempty"`
		DataMovementPriority int  `json:"dataMovementPriority,omitempty"`
	} `json:"health,omitempty"`
	Locks struct {
		DenyList []string `json:"lockDenyList,omitempty"`
	} `json:"locks,omitempty"`
	ConnectionString      string `json:"connectionString,omitempty"`
	RunningVersion        string `json:"runningVersion,omitempty"`
	Configured            bool   `json:"configured,omitempty"`
	DatabaseConfiguration struct {
		RedundancyMode string `json:"redundancy_mode,omitempty"`
		StorageEngine  string `json:"storage_engine,omitempty"`
	} `json:"databaseConfiguration,omitempty"`
}

// Labels of api/v1beta2/foundationdb_labels.go.
const (
	labelClusterName    = "foundationdb.org/fdb-cluster-name"
	labelProcessClass   = "foundationdb.org/fdb-process-class"
	labelProcessGroupID = "foundationdb.org/fdb-process-group-id"
)

// matchLabels is GetMatchLabels: spec.labels.matchLabels, else the cluster-name label.
func (s *clusterSpec) matchLabels(name string) map[string]string {
	if s.Labels.MatchLabels != nil {
		return s.Labels.MatchLabels
	}
	return map[string]string{labelClusterName: name}
}

// resourceLabels is GetResourceLabels.
func (s *clusterSpec) resourceLabels(name string) map[string]string {
	if s.Labels.ResourceLabels != nil {
		return s.Labels.ResourceLabels
	}
	return map[string]string{labelClusterName: name}
}

func (s *clusterSpec) processClassLabels() []string {
	if s.Labels.ProcessClassLabels != nil {
		return s.Labels.ProcessClassLabels
	}
	return []string{labelProcessClass}
}

func (s *clusterSpec) processGroupIDLabels() []string {
	if s.Labels.ProcessGroupIDLabels != nil {
		return s.Labels.ProcessGroupIDLabels
	}
	return []string{labelProcessGroupID}
}

// useDNS: the cluster file names coordinators by DNS name (UseDNSInClusterFile; unset is false
// as docs/cluster_spec.md documents it).
func (s *clusterSpec) useDNS() bool {
	return s.Routing.UseDNSInClusterFile != nil && *s.Routing.UseDNSInClusterFile
}

// dnsName is internal/pod_models.go GetPodDNSName: <pod>.<cluster>.<namespace>.svc.<domain>
// (GetDNSDomain: cluster.local unless spec.routing.dnsDomain).
func (s *clusterSpec) dnsName(cluster, namespace, pod string) string {
	domain := "cluster.local"
	if s.Routing.DNSDomain != nil && *s.Routing.DNSDomain != "" {
		domain = *s.Routing.DNSDomain
	}
	return pod + "." + cluster + "." + namespace + ".svc." + domain
}

// coordinatorEntry is how the cluster file names the coordinator at address of process group
// pg: the address, or with DNS the pod's DNS name with the address's port and flags
// (internal/coordinator/coordinator.go GetCoordinatorAddress).
func (s *clusterSpec) coordinatorEntry(cluster, namespace string, pg *processGroupStatus, address string) string {
	if !s.useDNS() {
		return address
	}
	_, rest, _ := strings.Cut(address, ":") // port[:tls]
	return s.dnsName(cluster, namespace, podName(cluster, pg)) + ":" + rest
}
