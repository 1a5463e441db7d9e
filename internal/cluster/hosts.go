package cluster

import "slices"

// Hosts are the cluster's hosts in the order they were made, each with
// its address: PostgreSQL's, the Temporal server's, the gateways', the
// workers'.
func (c *Cluster) Hosts() []*Host {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	return slices.Clone(c.net.hosts)
}
