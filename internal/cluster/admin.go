// Package cluster forms a Valkey Cluster from servers started with
// cluster-enabled yes, adds and removes shards, and moves hash slots between
// shards with their keys. It speaks the servers' own commands, as
// valkey-cli --cluster create, add-node, reshard and del-node do: CLUSTER
// MEET, ADDSLOTSRANGE, REPLICATE, SETSLOT and FORGET, and MIGRATE key by
// key. Every step reads the cluster's state first and does only what is
// missing, so a step cut short (an operator restart) is finished by the next
// call. It never fails a primary over: that is the cluster's own job.
package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Admin runs cluster commands on the servers. It expects them to run with
// cluster-allow-replica-migration no, as the operator configures them: a
// shard is a set of servers (a StatefulSet), its replicas stay with it, and
// a primary that gives its last slot away stays a primary, empty, until its
// shard is removed (by default it would turn into a replica of the node
// that took the slot, in the middle of the SETSLOT that moved it).
type Admin struct {
	// Dial returns a client for the server at addr (host:port), signed in
	// with a user that may run CLUSTER, CONFIG GET, INFO and MIGRATE.
	Dial func(addr string) *redis.Client
	// Username and Password are what MIGRATE signs in to the receiving
	// server with (AUTH2); empty Password: no AUTH.
	Username, Password string
	// Log reports each step; nothing when nil.
	Log func(format string, args ...any)
	// Wait bounds each wait for the cluster to agree (a handshake, the
	// state turning ok), and the retries of a read from a server that
	// times out: 60 s when zero.
	Wait time.Duration
}

// ErrOutOfTime is what MoveSlots returns when its context's deadline is
// too near to start moving another slot: it stops between slots rather
// than leave one half moved. Calling it again goes on.
var ErrOutOfTime = errors.New("out of time before the next slot")

// slotMargin is the least time MoveSlots starts a batch of slots with; it
// wants twice its longest batch so far when that is more (a batch took 5-10 s
// on 2 loaded cores, and one cut by the deadline fails the whole step).
const slotMargin = 3 * time.Second

// Node is a server as CLUSTER NODES describes it.
type Node struct {
	ID string
	// Addr is ip:port, the address it announces to the cluster, and Bus
	// its cluster bus port.
	Addr string
	Bus  int
	// Primary says the node is a primary; PrimaryID names a replica's.
	Primary   bool
	PrimaryID string
	// Myself says this is the node that answered.
	Myself bool
	// Failing says the node is flagged fail or pfail; Handshake that it
	// is still being met.
	Failing, Handshake bool
	// Slots are the slots it serves, sorted; Migrating and Importing the
	// slots it moves to and receives from another node, by that node's ID.
	Slots     []int
	Migrating map[int]string
	Importing map[int]string
}

// Nodes reads CLUSTER NODES from the server at addr.
func (a *Admin) Nodes(ctx context.Context, addr string) ([]Node, error) {
	var text string
	err := a.read(ctx, addr, func(ctx context.Context, c *redis.Client) (err error) {
		text, err = c.ClusterNodes(ctx).Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", addr, err)
	}
	return ParseNodes(text)
}

// read sends the server at addr the requests of do, which change nothing,
// over a connection of its own, and sends them again while they time out
// (the dial included): a node that is briefly slow, on a loaded machine or
// behind a long fsync or a blocking MIGRATE, answers a moment later, and
// failing the whole step for it would leave a rebalance half done until
// the next reconcile. It gives up when ctx ends, or after Wait. Any other
// error (a refused connection: no server listens) is returned at once.
func (a *Admin) read(ctx context.Context, addr string, do func(context.Context, *redis.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(a.Wait, time.Minute))
	defer cancel()
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		c := a.Dial(addr)
		err := do(ctx, c)
		_ = c.Close()
		var netErr net.Error
		if err == nil || !errors.As(err, &netErr) || !netErr.Timeout() {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		a.logf("%s timed out, asking again: %v", addr, err)
	}
}

// ParseNodes parses a CLUSTER NODES reply.
func ParseNodes(text string) ([]Node, error) {
	var nodes []Node
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q has %d fields, want at least 8", line, len(f))
		}
		n := Node{ID: f[0], Migrating: map[int]string{}, Importing: map[int]string{}}
		// ip:port@cport[,hostname]
		var bus string
		n.Addr, bus, _ = strings.Cut(f[1], "@")
		bus, _, _ = strings.Cut(bus, ",")
		n.Bus = atoi(bus)
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "master":
				n.Primary = true
			case "myself":
				n.Myself = true
			case "fail", "fail?":
				n.Failing = true
			case "handshake":
				n.Handshake = true
			}
		}
		if f[3] != "-" {
			n.PrimaryID = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				// [slot->-id] migrating, [slot-<-id] importing
				body := strings.Trim(s, "[]")
				if slot, id, ok := strings.Cut(body, "->-"); ok {
					n.Migrating[atoi(slot)] = id
				} else if slot, id, ok := strings.Cut(body, "-<-"); ok {
					n.Importing[atoi(slot)] = id
				}
				continue
			}
			first, last, isRange := strings.Cut(s, "-")
			if !isRange {
				last = first
			}
			for slot := atoi(first); slot <= atoi(last); slot++ {
				n.Slots = append(n.Slots, slot)
			}
		}
		slices.Sort(n.Slots)
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// myself is the node that answered CLUSTER NODES (the zero Node if the
// reply has none).
func myself(nodes []Node) Node {
	for _, n := range nodes {
		if n.Myself {
			return n
		}
	}
	return Node{}
}

// Create forms a cluster of shards: shards[i] are the addresses of shard
// i's servers, the first its primary, which serves Share(i, len(shards)).
// The servers must be empty and met by no other cluster.
func (a *Admin) Create(ctx context.Context, shards [][]string) error {
	var all []string
	for _, s := range shards {
		all = append(all, s...)
	}
	if err := a.Meet(ctx, all[0], all[1:]); err != nil {
		return err
	}
	for i, s := range shards {
		if err := a.assign(ctx, s[0], Share(i, len(shards))); err != nil {
			return err
		}
	}
	for _, s := range shards {
		if err := a.Replicate(ctx, s[0], s[1:]); err != nil {
			return err
		}
	}
	return a.WaitHealthy(ctx, all)
}

// Meet brings the servers at addrs into the cluster of the server at via,
// and waits until every node of it knows all the others.
func (a *Admin) Meet(ctx context.Context, via string, addrs []string) error {
	known, err := a.Nodes(ctx, via)
	if err != nil {
		return err
	}
	c := a.Dial(via)
	defer func() { _ = c.Close() }()
	ids := map[string]string{}
	for _, addr := range append([]string{via}, addrs...) {
		id, err := a.myID(ctx, addr)
		if err != nil {
			return err
		}
		ids[addr] = id
		if slices.ContainsFunc(known, func(n Node) bool { return n.ID == id }) {
			continue
		}
		ip, port, bus, err := a.busAddr(ctx, addr)
		if err != nil {
			return err
		}
		a.logf("CLUSTER MEET %s %d %d (node %s) via %s", ip, port, bus, id, via)
		if err := c.Do(ctx, "CLUSTER", "MEET", ip, port, bus).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s:%d on %s: %w", ip, port, via, err)
		}
	}
	// Every node of the cluster must know the new ones, not only via: a
	// slot moved to a new primary is refused by a node that has not met it.
	for _, n := range known {
		if !n.Failing && !n.Handshake {
			ids[n.Addr] = n.ID
		}
	}
	return a.waitFor(ctx, "every node to know the others", func(ctx context.Context) (string, error) {
		for addr := range ids {
			nodes, err := a.Nodes(ctx, addr)
			if err != nil {
				return "", err
			}
			for other, id := range ids {
				i := slices.IndexFunc(nodes, func(n Node) bool { return n.ID == id })
				if i < 0 || nodes[i].Handshake {
					return fmt.Sprintf("%s does not know %s (%s) yet", addr, other, id), nil
				}
			}
		}
		return "", nil
	})
}

// myID is the node ID of the server at addr.
func (a *Admin) myID(ctx context.Context, addr string) (string, error) {
	var id string
	err := a.read(ctx, addr, func(ctx context.Context, c *redis.Client) (err error) {
		id, err = c.Do(ctx, "CLUSTER", "MYID").Text()
		return err
	})
	if err != nil {
		return "", fmt.Errorf("CLUSTER MYID on %s: %w", addr, err)
	}
	return id, nil
}

// busAddr is what CLUSTER MEET needs of the server at addr: its IP, its
// port and its cluster bus port (cluster-port, or port+10000 when 0).
func (a *Admin) busAddr(ctx context.Context, addr string) (ip string, port, bus int, err error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, 0, err
	}
	port, err = strconv.Atoi(p)
	if err != nil {
		return "", 0, 0, fmt.Errorf("the port of %s: %w", addr, err)
	}
	if ip, err = resolveIP(ctx, host); err != nil {
		return "", 0, 0, err
	}
	var conf map[string]string
	err = a.read(ctx, addr, func(ctx context.Context, c *redis.Client) (err error) {
		conf, err = c.ConfigGet(ctx, "cluster-port").Result()
		return err
	})
	if err != nil {
		return "", 0, 0, fmt.Errorf("CONFIG GET cluster-port on %s: %w", addr, err)
	}
	if bus = atoi(conf["cluster-port"]); bus <= 0 {
		bus = port + 10000
	}
	return ip, port, bus, nil
}

// assign gives the primary at addr the slots of r that no node serves yet.
func (a *Admin) assign(ctx context.Context, addr string, r Range) error {
	nodes, err := a.Nodes(ctx, addr)
	if err != nil {
		return err
	}
	served := map[int]bool{}
	for _, n := range nodes {
		for _, s := range n.Slots {
			served[s] = true
		}
	}
	var missing []int
	for s := r.First; s <= r.Last; s++ {
		if !served[s] {
			missing = append(missing, s)
		}
	}
	c := a.Dial(addr)
	defer func() { _ = c.Close() }()
	for _, run := range ranges(missing) {
		a.logf("CLUSTER ADDSLOTSRANGE %d %d on %s", run.First, run.Last, addr)
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", run.First, run.Last).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %s: %w", run.First, run.Last, addr, err)
		}
	}
	return nil
}

// Replicate makes the servers at replicas replicas of the primary at
// primary, each once it knows it.
func (a *Admin) Replicate(ctx context.Context, primary string, replicas []string) error {
	id, err := a.myID(ctx, primary)
	if err != nil {
		return err
	}
	for _, addr := range replicas {
		err := a.waitFor(ctx, addr+" to replicate "+primary, func(ctx context.Context) (string, error) {
			nodes, err := a.Nodes(ctx, addr)
			if err != nil {
				return "", err
			}
			if myself(nodes).PrimaryID == id {
				return "", nil
			}
			if !slices.ContainsFunc(nodes, func(n Node) bool { return n.ID == id && !n.Handshake }) {
				return addr + " does not know " + primary + " yet", nil
			}
			c := a.Dial(addr)
			defer func() { _ = c.Close() }()
			a.logf("CLUSTER REPLICATE %s on %s", id, addr)
			if err := c.ClusterReplicate(ctx, id).Err(); err != nil {
				return "", fmt.Errorf("CLUSTER REPLICATE %s on %s: %w", id, addr, err)
			}
			return "CLUSTER REPLICATE sent", nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// WaitHealthy waits until every server at addrs reports cluster_state:ok
// and sees all 16384 slots served.
func (a *Admin) WaitHealthy(ctx context.Context, addrs []string) error {
	return a.waitFor(ctx, "cluster_state:ok", func(ctx context.Context) (string, error) {
		for _, addr := range addrs {
			var info string
			err := a.read(ctx, addr, func(ctx context.Context, c *redis.Client) (err error) {
				info, err = c.ClusterInfo(ctx).Result()
				return err
			})
			if err != nil {
				return "", fmt.Errorf("CLUSTER INFO on %s: %w", addr, err)
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16384") {
				return addr + " is not ok yet", nil
			}
		}
		return "", nil
	})
}

// WaitAgreed waits until every server at addrs, replicas included, maps
// every slot to the same primary and none is being moved. A client loads
// its slot map from any node: one that asked a node still behind would
// keep sending a moved slot's commands to its old primary, which answers
// MOVED only as long as it is part of the cluster. So a shard is removed
// once the nodes agree and clients had time to load the map again
// (go-redis does after a MOVED, or when its map is 10 s old).
func (a *Admin) WaitAgreed(ctx context.Context, addrs []string) error {
	return a.waitFor(ctx, "the nodes to agree on the slots", func(ctx context.Context) (string, error) {
		var first map[int]string
		for _, addr := range addrs {
			nodes, err := a.Nodes(ctx, addr)
			if err != nil {
				return "", err
			}
			owner := map[int]string{}
			for _, n := range nodes {
				if len(n.Migrating)+len(n.Importing) > 0 {
					return fmt.Sprintf("%s still moves slots", n.Addr), nil
				}
				for _, slot := range n.Slots {
					owner[slot] = n.ID
				}
			}
			if first == nil {
				first = owner
				continue
			}
			for slot := range Slots {
				if owner[slot] != first[slot] {
					return fmt.Sprintf("%s maps slot %d to %q, %s to %q", addr, slot, owner[slot], addrs[0], first[slot]), nil
				}
			}
		}
		return "", nil
	})
}

// Rebalance spreads the slots evenly over the primaries at primaries, in
// shard order (PlanMoves), moving them with their keys (MoveSlots), once
// they all report the cluster ok: a new
// shard's primary gets its share, and a primary not listed gives all of
// its slots away, so that its shard can be removed.
func (a *Admin) Rebalance(ctx context.Context, primaries []string) error {
	// A node just met reports the cluster down until it has seen every
	// slot served, and refuses the keys MIGRATE brings it until then.
	if err := a.WaitHealthy(ctx, primaries); err != nil {
		return err
	}
	nodes, err := a.Nodes(ctx, primaries[0])
	if err != nil {
		return err
	}
	owned := map[string][]int{}
	addrOf := map[string]string{}
	for _, n := range nodes {
		if n.Primary {
			owned[n.ID] = n.Slots
		}
	}
	var targets []string
	for _, addr := range primaries {
		id, err := a.myID(ctx, addr)
		if err != nil {
			return err
		}
		targets = append(targets, id)
		addrOf[id] = addr
	}
	for _, n := range nodes {
		if _, ok := addrOf[n.ID]; !ok {
			addrOf[n.ID] = n.Addr
		}
	}
	for _, m := range PlanMoves(owned, targets) {
		if err := a.MoveSlots(ctx, addrOf[m.From], addrOf[m.To], m.Slots); err != nil {
			return err
		}
	}
	return nil
}

// migrateBatch is how many keys one MIGRATE moves.
const migrateBatch = 100

// slotBatch is how many slots MoveSlots takes through each step of a move
// at once, and slotConns over how many connections to a server it sends a
// step's SETSLOTs. A primary answers a SETSLOT once its replicas have it
// and its nodes.conf is saved: about a millisecond or two, which was most
// of a slot's move, one by one. The SETSLOTs of many connections share one
// such wait and one save (16 connections: about 10 times as fast, measured
// on 2 cores); those of one connection, pipelined or not, do not.
const (
	slotBatch = 128
	slotConns = 16
)

// MoveSlots moves slots from the primary at from to the primary at to,
// with their keys, slotBatch slots at a time: IMPORTING on the receiver,
// MIGRATING on the giver, MIGRATE of the keys of the slots that hold any in
// batches until none is left, then SETSLOT NODE on the receiver, the giver
// and the other primaries. Clients keep working meanwhile: a key already
// moved is answered with ASK, a slot moved with MOVED. A slot half moved
// before (a call cut short) is finished.
func (a *Admin) MoveSlots(ctx context.Context, from, to string, slots []int) error {
	fromID, err := a.myID(ctx, from)
	if err != nil {
		return err
	}
	toID, err := a.myID(ctx, to)
	if err != nil {
		return err
	}
	toHost, toPort, err := net.SplitHostPort(to)
	if err != nil {
		return err
	}
	nodes, err := a.Nodes(ctx, from)
	if err != nil {
		return err
	}
	// The other primaries learn each slot's new owner at once too.
	primaries := []string{to, from}
	for _, n := range nodes {
		if n.Primary && n.ID != fromID && n.ID != toID && !n.Failing {
			primaries = append(primaries, n.Addr)
		}
	}
	conns := map[string][]*redis.Client{}
	for _, addr := range primaries {
		for range slotConns {
			conns[addr] = append(conns[addr], a.Dial(addr))
		}
	}
	defer func() {
		for _, cs := range conns {
			for _, c := range cs {
				_ = c.Close()
			}
		}
	}()
	src := conns[from][0]
	a.logf("moving %d slots (%s) from %s to %s", len(slots), FormatSlots(slots), from, to)
	var longest time.Duration
	for done := 0; done < len(slots); {
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < max(slotMargin, 2*longest) {
			return fmt.Errorf("moved %d of %d slots from %s to %s: %w", done, len(slots), from, to, ErrOutOfTime)
		}
		start := time.Now()
		batch := slots[done:min(done+slotBatch, len(slots))]
		if err := setSlots(ctx, conns[to], to, batch, "IMPORTING", fromID); err != nil {
			return err
		}
		if err := setSlots(ctx, conns[from], from, batch, "MIGRATING", toID); err != nil {
			return err
		}
		// Once MIGRATING, the giver sends a key it does not hold to the
		// receiver: a slot without keys gets none.
		counts, err := src.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, slot := range batch {
				p.ClusterCountKeysInSlot(ctx, slot)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("CLUSTER COUNTKEYSINSLOT on %s: %w", from, err)
		}
		for i, slot := range batch {
			if counts[i].(*redis.IntCmd).Val() == 0 {
				continue
			}
			if err := a.migrateKeys(ctx, src, from, to, toHost, toPort, slot); err != nil {
				return err
			}
		}
		// The receiver first: once it owns the slots, the giver's MOVED
		// answers point at a node that serves them.
		for _, addr := range primaries {
			if err := setSlots(ctx, conns[addr], addr, batch, "NODE", toID); err != nil {
				return err
			}
		}
		done += len(batch)
		longest = max(longest, time.Since(start))
	}
	return nil
}

// migrateTimeout is MIGRATE's own timeout: how long the giver waits on the
// receiver for one batch.
const migrateTimeout = 10 * time.Second

// migrateKeys moves the keys of slot from the giver (src, at from) to the
// receiver at to, migrateBatch at a time, until the giver holds none.
//
// A step that times out is taken again: the reply to MIGRATE later than the
// client's read timeout, the giver's IOERR when the receiver did not answer
// within migrateTimeout (a loaded node, a long fsync), or the giver's
// GETKEYSINSLOT waiting behind such a MIGRATE. MIGRATE with REPLACE moves
// what the giver still holds; the keys an earlier attempt moved are no longer
// among them. It gives up when ctx ends.
func (a *Admin) migrateKeys(ctx context.Context, src *redis.Client, from, to, toHost, toPort string, slot int) error {
	delay := 100 * time.Millisecond
	for {
		err := a.migrateBatch(ctx, src, from, to, toHost, toPort, slot)
		switch {
		case err == nil:
			continue
		case errors.Is(err, errSlotEmpty):
			return nil
		case !timedOut(err):
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
		a.logf("%v; asking again", err)
	}
}

// errSlotEmpty: the giver holds no key of the slot.
var errSlotEmpty = errors.New("no key left in the slot")

// migrateBatch moves up to migrateBatch keys of slot.
func (a *Admin) migrateBatch(ctx context.Context, src *redis.Client, from, to, toHost, toPort string, slot int) error {
	keys, err := src.ClusterGetKeysInSlot(ctx, slot, migrateBatch).Result()
	if err != nil {
		return fmt.Errorf("CLUSTER GETKEYSINSLOT %d on %s: %w", slot, from, err)
	}
	if len(keys) == 0 {
		return errSlotEmpty
	}
	args := []any{"MIGRATE", toHost, toPort, "", 0, migrateTimeout.Milliseconds(), "REPLACE"}
	if a.Password != "" {
		args = append(args, "AUTH2", cmp.Or(a.Username, "default"), a.Password)
	}
	args = append(args, "KEYS")
	for _, k := range keys {
		args = append(args, k)
	}
	if err := src.Do(ctx, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("MIGRATE of %d keys of slot %d from %s to %s: %w", len(keys), slot, from, to, err)
	}
	return nil
}

// timedOut reports whether err is a client's read timeout or a server's
// IOERR (MIGRATE's "error or timeout" talking to the receiver).
func timedOut(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	var redisErr redis.Error
	return errors.As(err, &redisErr) && strings.HasPrefix(redisErr.Error(), "IOERR")
}

// setSlots sends CLUSTER SETSLOT <slot> state id for each of slots to the
// server at addr, spread over conns, its connections to it.
func setSlots(ctx context.Context, conns []*redis.Client, addr string, slots []int, state, id string) error {
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			for j := i; j < len(slots); j += len(conns) {
				if err := c.Do(ctx, "CLUSTER", "SETSLOT", slots[j], state, id).Err(); err != nil {
					errs[i] = fmt.Errorf("CLUSTER SETSLOT %d %s %s on %s: %w", slots[j], state, id, addr, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// OpenMoves are the slot moves the servers that answered CLUSTER NODES
// with nodes (one reply per server) have open: a node MIGRATING a slot or
// IMPORTING one, or a replica of such a node (a primary replicates SETSLOT
// to its replicas before it runs it).
func OpenMoves(views [][]Node) []Move {
	open := map[[3]string]bool{}
	for _, nodes := range views {
		me := myself(nodes)
		p := me.ID
		if !me.Primary {
			p = me.PrimaryID
		}
		for slot, to := range me.Migrating {
			open[[3]string{strconv.Itoa(slot), p, to}] = true
		}
		for slot, from := range me.Importing {
			open[[3]string{strconv.Itoa(slot), from, p}] = true
		}
	}
	var moves []Move
	for m := range open {
		slot, _ := strconv.Atoi(m[0])
		moves = append(moves, Move{From: m[1], To: m[2], Slots: []int{slot}})
	}
	slices.SortFunc(moves, func(a, b Move) int {
		return cmp.Or(cmp.Compare(a.Slots[0], b.Slots[0]), strings.Compare(a.From, b.From), strings.Compare(a.To, b.To))
	})
	return moves
}

// FinishMoves completes the slot moves a MoveSlots cut short left open on
// the servers at addrs (every server of the cluster, replicas included): a
// slot its giver still serves is moved on to its receiver, keys and all; a
// slot the receiver serves already is closed on both ends, and the giver's
// SETSLOT reaches its replicas too. A move whose giver or receiver does not
// answer, or whose slot neither serves, is left as it is and returned as an
// error naming the slot.
func (a *Admin) FinishMoves(ctx context.Context, addrs []string) error {
	var views [][]Node
	addrOf := map[string]string{}
	serves := map[string]map[int]bool{}
	for _, addr := range addrs {
		nodes, err := a.Nodes(ctx, addr)
		if err != nil {
			return err
		}
		views = append(views, nodes)
		me := myself(nodes)
		addrOf[me.ID] = addr
		if me.Primary {
			serves[me.ID] = map[int]bool{}
			for _, slot := range me.Slots {
				serves[me.ID][slot] = true
			}
		}
	}
	var stuck []string
	// The slots to move on, by giver and receiver: one MoveSlots each, in
	// batches, as a MoveSlots cut short leaves a batch of them open.
	resume := map[[2]string][]int{}
	for _, m := range OpenMoves(views) {
		slot := m.Slots[0]
		from, to := addrOf[m.From], addrOf[m.To]
		switch {
		case from == "" || to == "":
			stuck = append(stuck, fmt.Sprintf("slot %d from node %s to node %s: one of them does not answer", slot, m.From, m.To))
		case serves[m.To][slot]:
			for _, addr := range []string{to, from} {
				c := a.Dial(addr)
				a.logf("CLUSTER SETSLOT %d NODE %s on %s: closing a finished move", slot, m.To, addr)
				err := c.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", m.To).Err()
				_ = c.Close()
				if err != nil {
					return fmt.Errorf("CLUSTER SETSLOT %d NODE %s on %s: %w", slot, m.To, addr, err)
				}
			}
		case serves[m.From][slot]:
			resume[[2]string{from, to}] = append(resume[[2]string{from, to}], slot)
		default:
			stuck = append(stuck, fmt.Sprintf("slot %d from node %s to node %s: neither serves it", slot, m.From, m.To))
		}
	}
	pairs := slices.Collect(maps.Keys(resume))
	slices.SortFunc(pairs, func(a, b [2]string) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
	for _, p := range pairs {
		a.logf("resuming the move of slots %s from %s to %s", FormatSlots(resume[p]), p[0], p[1])
		if err := a.MoveSlots(ctx, p[0], p[1], resume[p]); err != nil {
			return err
		}
	}
	if len(stuck) > 0 {
		return fmt.Errorf("moves left open: %s", strings.Join(stuck, "; "))
	}
	return nil
}

// RemoveShard takes the servers at shard (a primary that serves no slot and
// its replicas) out of the cluster: every other node forgets them, and
// they are reset, so that gossip does not bring them back. remaining are
// the servers that stay. A primary that still serves slots is refused: its
// keys would be lost.
func (a *Admin) RemoveShard(ctx context.Context, remaining, shard []string) error {
	nodes, err := a.Nodes(ctx, shard[0])
	if err != nil {
		return err
	}
	if me := myself(nodes); len(me.Slots) > 0 {
		return fmt.Errorf("%s still serves %d slots (%s): move them to another shard first", shard[0], len(me.Slots), FormatSlots(me.Slots))
	}
	var ids []string
	for _, addr := range shard {
		id, err := a.myID(ctx, addr)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	for _, addr := range remaining {
		c := a.Dial(addr)
		for _, id := range ids {
			if err := c.Do(ctx, "CLUSTER", "FORGET", id).Err(); err != nil && !strings.Contains(err.Error(), "Unknown node") {
				_ = c.Close()
				return fmt.Errorf("CLUSTER FORGET %s on %s: %w", id, addr, err)
			}
		}
		_ = c.Close()
	}
	for _, addr := range shard {
		c := a.Dial(addr)
		err := c.Do(ctx, "CLUSTER", "RESET", "HARD").Err()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER RESET HARD on %s: %w", addr, err)
		}
	}
	a.logf("removed the shard of %s from the cluster", shard[0])
	return nil
}

// waitFor polls check until it reports nothing pending, for Wait at most.
func (a *Admin) waitFor(ctx context.Context, what string, check func(context.Context) (pending string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(a.Wait, time.Minute))
	defer cancel()
	var pending string
	for {
		p, err := check(ctx)
		if err != nil && ctx.Err() != nil && pending != "" {
			// The wait ran out during a check: what it waited for says
			// more than the deadline.
			return fmt.Errorf("waiting for %s: %s (%w)", what, pending, err)
		}
		if err != nil {
			return err
		}
		if pending = p; pending == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %s", what, pending)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (a *Admin) logf(format string, args ...any) {
	if a.Log != nil {
		a.Log(format, args...)
	}
}
