package consul

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/mcpgrain/mcpgrain/cluster/membership"
)

// Consul's limits on service meta (agent/structs.validateMetaPair).
const (
	metaMaxPairs       = 64
	metaKeyMaxLen      = 128
	metaValueMaxLen    = 512
	metaReservedPrefix = "consul-"
)

var metaKeyFormat = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`).MatchString

// checkID is the ID of the TTL check of the member with id.
func checkID(id string) string { return "service:" + id }

// validateMember reports why m cannot be registered so that the registration
// converts back to exactly m.
func validateMember(m membership.Member) error {
	if m.ID == "" {
		return fmt.Errorf("member ID is empty")
	}
	if strings.Contains(m.ID, "/") {
		return fmt.Errorf("member ID %q must not contain '/' (Consul puts it in URL paths)", m.ID)
	}
	if _, _, err := splitAddress(m.Address); err != nil {
		return err
	}
	if len(m.Meta) > metaMaxPairs {
		return fmt.Errorf("member meta has %d entries; Consul allows at most %d", len(m.Meta), metaMaxPairs)
	}
	for k, v := range m.Meta {
		switch {
		case !metaKeyFormat(k):
			return fmt.Errorf("member meta key %q: Consul allows only letters, digits, '_' and '-'", k)
		case len(k) > metaKeyMaxLen:
			return fmt.Errorf("member meta key %q is longer than Consul's limit of %d", k, metaKeyMaxLen)
		case strings.HasPrefix(k, metaReservedPrefix):
			return fmt.Errorf("member meta key %q: the prefix %q is reserved by Consul", k, metaReservedPrefix)
		case len(v) > metaValueMaxLen:
			return fmt.Errorf("member meta value for %q is longer than Consul's limit of %d", k, metaValueMaxLen)
		}
	}
	return nil
}

// splitAddress splits a member address into the host and port Consul
// stores. It rejects addresses that would not convert back unchanged.
func splitAddress(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("member address %q is not host:port: %w", addr, err)
	}
	if host == "" {
		return "", 0, fmt.Errorf("member address %q has no host; other members could not reach it", addr)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != ps {
		return "", 0, fmt.Errorf("member address %q: port must be a decimal number in 1..65535", addr)
	}
	return host, port, nil
}

// registration returns the agent service registration of m under service
// name: ID = m.ID, Address/Port from m.Address, Tags = m.Kinds (order kept),
// Meta = m.Meta, with a TTL check that starts out passing. m must have passed
// validateMember.
func registration(name string, m membership.Member, ttl, deregisterAfter time.Duration) *api.AgentServiceRegistration {
	host, port, _ := splitAddress(m.Address)
	return &api.AgentServiceRegistration{
		ID:      m.ID,
		Name:    name,
		Address: host,
		Port:    port,
		Tags:    slices.Clone(m.Kinds),
		Meta:    maps.Clone(m.Meta),
		Check: &api.AgentServiceCheck{
			CheckID:                        checkID(m.ID),
			Name:                           "mcpgrain liveness lease",
			TTL:                            ttl.String(),
			Status:                         api.HealthPassing,
			DeregisterCriticalServiceAfter: deregisterAfter.String(),
		},
	}
}

// memberFromEntry converts one health entry back to the Member that
// registered it. ok is false for entries that cannot be a member (no
// service, no address or port).
func memberFromEntry(e *api.ServiceEntry) (m membership.Member, ok bool) {
	if e == nil || e.Service == nil || e.Service.ID == "" {
		return membership.Member{}, false
	}
	s := e.Service
	host := s.Address
	if host == "" && e.Node != nil {
		host = e.Node.Address // Consul's rule for services registered without an address
	}
	if host == "" || s.Port <= 0 {
		return membership.Member{}, false
	}
	m = membership.Member{ID: s.ID, Address: net.JoinHostPort(host, strconv.Itoa(s.Port))}
	if len(s.Tags) > 0 {
		m.Kinds = slices.Clone(s.Tags)
	}
	if len(s.Meta) > 0 {
		m.Meta = maps.Clone(s.Meta)
	}
	return m, true
}

// viewFromEntries converts a health query result into a View, skipping
// entries that are not members.
func viewFromEntries(entries []*api.ServiceEntry) (v membership.View, skipped int) {
	ms := make([]membership.Member, 0, len(entries))
	for _, e := range entries {
		m, ok := memberFromEntry(e)
		if !ok {
			skipped++
			continue
		}
		ms = append(ms, m)
	}
	return membership.NewView(ms...), skipped
}
