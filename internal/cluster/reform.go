package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// A node keeps its ID, its slots and its peers in nodes.conf, on its
// volume, and finds the peers again after a restart at the addresses
// recorded there. Valkey 8.1 connects the cluster bus to a peer's IP and
// bus port only (clusterNodeCronHandleReconnect: connConnect(node->ip,
// node->cport)); the hostname a node announces
// (cluster-announce-hostname) travels in a ping extension for clients'
// redirections (cluster-preferred-endpoint-type hostname) and is never
// resolved to reach the node. A peer's address changes when
//
//   - the peer itself pings from its new address: a node that restarts
//     alone reaches the others at their unchanged addresses, and they take
//     its new one from the connection (nodeUpdateAddressIfNeeded);
//   - gossip names it at a new address while it is failing
//     (clusterProcessGossipSection), which needs a node that reaches it;
//   - a MEET to the new address is answered with the known node ID: the
//     handshake node is dropped and the known one moves there
//     (clusterProcessPacket, "Handshake: we already know node"). The
//     sender then PINGs it there, and a PING from a known node moves the
//     sender to its new address on that side too. The met node also takes
//     its own new IP from the MEET's connection (myself->ip, which a
//     restart leaves as nodes.conf had it, and clients are sent to).
//
// When every pod restarts at once, every address changes, and no node can
// reach another to learn anything: nothing inside the cluster repairs it.
// The operator knows the new addresses (it reads the pods) and every node's
// ID (CLUSTER NODES, myself), so it sends the MEETs: the least that brings
// back every node as itself, slots, roles and replication included (a
// replica whose primary moves follows it, replicationSetPrimary). The
// servers' start script could MEET its peers by their DNS names (the
// headless Service publishes pods before they are Ready), but at its start
// most peers do not exist yet (each shard's StatefulSet starts its pods in
// order), so it would have to go on beside the server, a second process in
// the container that retries, with the credentials and TLS of the bus; the
// operator already reads every server on every reconcile with both, and
// plans from what each node records, so it also mends a cluster only partly
// apart. The price: while no operator runs, the cluster waits for one.

// Member is a server that answers, as the operator sees it now: the
// address it serves clients at (IP and port) and CLUSTER NODES as it
// answered it, its own line (myself) included.
type Member struct {
	Addr  string
	Nodes []Node
}

// Introduction is a CLUSTER MEET to send to the server at On: the node
// with ID, which listens at Addr with cluster bus port Bus.
type Introduction struct {
	On   string
	ID   string
	Addr string
	Bus  int
}

// PlanIntroductions are the MEETs that bring members back together once
// their addresses changed: on each member, one for each other member it
// records at an address (IP, port or bus port) where that one no longer
// listens. Both ends of a pair are planned, not one: one MEET would move
// both, but only the met node learns its own new IP from it. A member
// that does not know another's node ID at all is not met here: that is a
// new node, and meeting it is Meet's. The plan is made again from a fresh
// read after each round, so a MEET lost on the way is sent again.
func PlanIntroductions(members []Member) []Introduction {
	type current struct {
		id, addr string
		bus      int
	}
	var now []current
	for _, m := range members {
		if me := myself(m.Nodes); me.ID != "" {
			now = append(now, current{me.ID, m.Addr, me.Bus})
		}
	}
	var plan []Introduction
	for _, m := range members {
		me := myself(m.Nodes)
		for _, other := range now {
			if other.id == me.ID {
				continue
			}
			i := slices.IndexFunc(m.Nodes, func(n Node) bool { return n.ID == other.id })
			if i < 0 || (sameAddr(m.Nodes[i].Addr, other.addr) && m.Nodes[i].Bus == other.bus) {
				continue
			}
			plan = append(plan, Introduction{On: m.Addr, ID: other.id, Addr: other.addr, Bus: other.bus})
		}
	}
	return plan
}

// sameAddr says recorded, an address as CLUSTER NODES writes it (ip:port,
// an IPv6 IP without brackets), is addr (host:port, brackets and all).
func sameAddr(recorded, addr string) bool {
	i := strings.LastIndexByte(recorded, ':')
	host, port, err := net.SplitHostPort(addr)
	return i >= 0 && err == nil && recorded[i+1:] == port && strings.EqualFold(recorded[:i], host)
}

// Introduce sends the MEETs of plan (PlanIntroductions). It does not wait
// for the handshakes: the caller reads the cluster again, and plans again
// what is still apart.
func (a *Admin) Introduce(ctx context.Context, plan []Introduction) error {
	for _, in := range plan {
		host, port, err := net.SplitHostPort(in.Addr)
		if err != nil {
			return err
		}
		ip, err := resolveIP(ctx, host)
		if err != nil {
			return err
		}
		c := a.Dial(in.On)
		a.logf("CLUSTER MEET %s %s %d on %s: node %s moved there", ip, port, in.Bus, in.On, in.ID)
		err = c.Do(ctx, "CLUSTER", "MEET", ip, port, strconv.Itoa(in.Bus)).Err()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER MEET %s:%s on %s: %w", ip, port, in.On, err)
		}
	}
	return nil
}

// resolveIP is host's first IP, host itself when it is one: CLUSTER MEET
// takes an IP.
func resolveIP(ctx context.Context, host string) (string, error) {
	if net.ParseIP(host) != nil {
		return host, nil
	}
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil {
		return "", fmt.Errorf("resolving %s for CLUSTER MEET: %w", host, err)
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("resolving %s for CLUSTER MEET: no address", host)
	}
	return ips[0], nil
}
