// The Go client (Debian's golang-github-samuel-go-zookeeper-dev, the
// samuel/go-zookeeper package) against one server or the members of an
// ensemble, driven by tests/go_client.rs.
//
//	gozk <host:port[,host:port...]> <api|lock|ensemble>
//
// For each check it prints one line, `PASS <name>` or `FAIL <name>: <detail>`;
// for every outcome that must be the same on ringkeeper and on Apache
// ZooKeeper it prints `RESULT <name> <value>` (error names, the stat fields
// the scenario determines, zxids relative to the scenario's first write,
// sorted child lists, watch events in the order received, multi results);
// the driver compares them between the servers. It ends with
// `DONE passed=<n> failed=<n>` and exits 1 if a check failed. A watchdog
// ends the program (FAIL <scenario>.deadline, naming the step it was at)
// if a scenario runs past its bound: a request the server never answers
// would otherwise wait for ever, as the client has no per-request timeout.
//
// Built in GOPATH mode (no modules, no network):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o gozk tests/go_client/main.go
package main

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samuel/go-zookeeper/zk"
)

const (
	// Asked for; a server grants it within its min/max session timeout.
	sessionTimeout = 10 * time.Second
	// How long a session may take to be established (or re-established).
	connectWait = 20 * time.Second
	// How long a watch event or a state change may take.
	eventWait = 10 * time.Second
)

// ---------------------------------------------------------------------
// Output

var (
	outMu   sync.Mutex
	passed  int
	failed  int
	emitted = map[string]bool{}
	curStep atomic.Value // string: what the scenario is doing, for the watchdog
)

func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s)
}

// printLine writes one line; a name printed twice with the same kind is
// itself a failure (each check and each result has one line).
func printLine(kind, name, rest string) {
	outMu.Lock()
	defer outMu.Unlock()
	key := kind + " " + name
	if kind == "PASS" || kind == "FAIL" {
		key = "CHECK " + name
	}
	if emitted[key] {
		failed++
		fmt.Printf("FAIL duplicate.%s: %s printed twice\n", name, kind)
		return
	}
	emitted[key] = true
	switch kind {
	case "PASS":
		passed++
		fmt.Printf("PASS %s\n", name)
	case "FAIL":
		failed++
		fmt.Printf("FAIL %s: %s\n", name, oneLine(rest))
	default:
		fmt.Printf("%s %s %s\n", kind, name, oneLine(rest))
	}
}

func pass(name string) { printLine("PASS", name, "") }

func fail(name, format string, a ...interface{}) {
	printLine("FAIL", name, fmt.Sprintf(format, a...))
}

// result records an outcome the driver compares between servers.
func result(name, format string, a ...interface{}) {
	printLine("RESULT", name, fmt.Sprintf(format, a...))
}

// info is for people reading the log; the driver ignores it.
func info(format string, a ...interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Printf("INFO %s\n", oneLine(fmt.Sprintf(format, a...)))
}

func step(s string) { curStep.Store(s) }

// A check collects problems and prints one PASS or FAIL line when done.
type check struct {
	name  string
	probs []string
}

func newCheck(name string) *check { return &check{name: name} }

func (c *check) expect(ok bool, format string, a ...interface{}) bool {
	if !ok {
		c.probs = append(c.probs, fmt.Sprintf(format, a...))
	}
	return ok
}

// outcome records err as RESULT `name` and checks that it is `want`.
func (c *check) outcome(name string, err error, want string) bool {
	got := errName(err)
	result(name, "%s", got)
	return c.expect(got == want, "%s: got %s, want %s", name, got, want)
}

func (c *check) done() {
	if len(c.probs) == 0 {
		pass(c.name)
	} else {
		fail(c.name, "%s", strings.Join(c.probs, "; "))
	}
}

// ---------------------------------------------------------------------
// Naming outcomes

var knownErrs = []struct {
	err  error
	name string
}{
	{zk.ErrNoNode, "NoNode"},
	{zk.ErrNodeExists, "NodeExists"},
	{zk.ErrBadVersion, "BadVersion"},
	{zk.ErrNoAuth, "NoAuth"},
	{zk.ErrNotEmpty, "NotEmpty"},
	{zk.ErrNoChildrenForEphemerals, "NoChildrenForEphemerals"},
	{zk.ErrInvalidACL, "InvalidACL"},
	{zk.ErrAuthFailed, "AuthFailed"},
	{zk.ErrSessionExpired, "SessionExpired"},
	{zk.ErrSessionMoved, "SessionMoved"},
	{zk.ErrAPIError, "APIError"},
	// Every code the client has no name for (RuntimeInconsistency,
	// Unimplemented, BadArguments, ...).
	{zk.ErrUnknown, "Unknown"},
	{zk.ErrClosing, "Closing"},
	{zk.ErrNothing, "Nothing"},
	{zk.ErrNoServer, "NoServer"},
	{zk.ErrInvalidPath, "InvalidPath"},
}

// errName names an error the same way whichever server caused it. The
// client reports a dropped connection either as ErrConnectionClosed or as
// the socket's own error, depending on which of its loops notices first:
// both are ConnectionLost.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	for _, k := range knownErrs {
		if err == k.err {
			return k.name
		}
	}
	var netErr net.Error
	if err == zk.ErrConnectionClosed || err == io.EOF || err == io.ErrUnexpectedEOF ||
		errors.As(err, &netErr) {
		return "ConnectionLost"
	}
	return "Other(" + err.Error() + ")"
}

var sessionNames sync.Map // session id (int64) -> name

func ownerName(owner int64) string {
	if owner == 0 {
		return "none"
	}
	if n, ok := sessionNames.Load(owner); ok {
		return "session:" + n.(string)
	}
	return fmt.Sprintf("other:%#x", owner)
}

// The stat fields a scenario determines (times are not; zxids are, relative
// to the scenario's first write: see zxids).
func statDesc(st *zk.Stat) string {
	if st == nil {
		return "stat=nil"
	}
	return fmt.Sprintf("v=%d cv=%d av=%d dl=%d nc=%d eo=%s",
		st.Version, st.Cversion, st.Aversion, st.DataLength, st.NumChildren,
		ownerName(st.EphemeralOwner))
}

var zxidBase int64

func zxids(st *zk.Stat) string {
	if st == nil {
		return "stat=nil"
	}
	return fmt.Sprintf("cz=%+d mz=%+d pz=%+d",
		st.Czxid-zxidBase, st.Mzxid-zxidBase, st.Pzxid-zxidBase)
}

func fnvHex(b []byte) string {
	h := fnv.New64a()
	h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())
}

func dataDesc(d []byte) string {
	switch {
	case d == nil:
		return "nil"
	case len(d) <= 40:
		return strconv.Quote(string(d))
	default:
		return fmt.Sprintf("len=%d,fnv=%s", len(d), fnvHex(d))
	}
}

func sortedList(names []string) string {
	s := append([]string(nil), names...)
	sort.Strings(s)
	return "[" + strings.Join(s, ",") + "]"
}

func aclDesc(acl []zk.ACL) string {
	parts := make([]string, len(acl))
	for i, a := range acl {
		parts[i] = fmt.Sprintf("%d:%s:%s", a.Perms, a.Scheme, a.ID)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func eventsDesc(evs []zk.Event) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = fmt.Sprintf("%s:%s", e.Type, e.Path)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func statesDesc(st []zk.State) string {
	parts := make([]string, len(st))
	for i, s := range st {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// ---------------------------------------------------------------------
// Sessions

type logger struct{ name string }

func (l logger) Printf(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "%s [%s] %s\n", time.Now().Format("15:04:05.000"), l.name,
		fmt.Sprintf(format, a...))
}

// A session records every node event (in the order the client received
// them) and every state change of its connection.
type session struct {
	name   string
	c      *zk.Conn
	mu     sync.Mutex
	events []zk.Event
	states []zk.State
	closed bool
}

func (s *session) onEvent(ev zk.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Type == zk.EventSession {
		s.states = append(s.states, ev.State)
	} else {
		s.events = append(s.events, ev)
	}
}

func (s *session) eventCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

func (s *session) eventsFrom(i int) []zk.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]zk.Event(nil), s.events[i:]...)
}

func (s *session) stateCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.states)
}

func (s *session) statesFrom(i int) []zk.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]zk.State(nil), s.states[i:]...)
}

func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitState waits until the state `want` shows up at index `from` or later.
func (s *session) waitState(want zk.State, from int, d time.Duration) bool {
	return poll(d, func() bool {
		for _, st := range s.statesFrom(from) {
			if st == want {
				return true
			}
		}
		return false
	})
}

func (s *session) sawState(want zk.State, from int) bool {
	for _, st := range s.statesFrom(from) {
		if st == want {
			return true
		}
	}
	return false
}

func connect(servers []string, name string) (*session, error) {
	s := &session{name: name}
	c, _, err := zk.Connect(servers, sessionTimeout, zk.WithEventCallback(s.onEvent),
		zk.WithLogger(logger{name}))
	if err != nil {
		return nil, err
	}
	s.c = c
	if !s.waitState(zk.StateHasSession, 0, connectWait) {
		s.close()
		return nil, fmt.Errorf("no session on %v within %v (states %s)", servers, connectWait,
			statesDesc(s.statesFrom(0)))
	}
	sessionNames.Store(c.SessionID(), name)
	return s, nil
}

func mustConnect(servers []string, name, checkName string) *session {
	s, err := connect(servers, name)
	if err != nil {
		fail(checkName, "session %s: %v", name, err)
		finish()
	}
	return s
}

// close ends the session (the client waits at most a second for the
// server's answer to closeSession).
func (s *session) close() {
	s.mu.Lock()
	closed := s.closed
	s.closed = true
	s.mu.Unlock()
	if !closed {
		s.c.Close()
	}
}

func waitEvent(ch <-chan zk.Event) (zk.Event, bool) {
	if ch == nil {
		return zk.Event{}, false
	}
	select {
	case ev, ok := <-ch:
		return ev, ok
	case <-time.After(eventWait):
		return zk.Event{}, false
	}
}

func evDesc(ev zk.Event, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprintf("%s:%s", ev.Type, ev.Path)
}

// barrier makes sure everything the server sent this session before its
// answer to a later request has arrived: watch events for writes other
// sessions had acknowledged before are sent ahead of it.
func (s *session) barrier(path string) error {
	if _, err := s.c.Sync(path); err != nil {
		return err
	}
	_, _, err := s.c.Exists(path)
	return err
}

var world = zk.WorldACL(zk.PermAll)

// ---------------------------------------------------------------------
// Scenario "api": one server, every call the client offers.

const root = "/go-api"

// node records a node as session s reads it: data, stat and zxids.
func node(s *session, name, path string) ([]byte, *zk.Stat, error) {
	data, st, err := s.c.Get(path)
	if err != nil {
		result("node."+name, "err=%s", errName(err))
		return nil, nil, err
	}
	result("node."+name, "data=%s %s", dataDesc(data), statDesc(st))
	result("zxid."+name, "%s", zxids(st))
	return data, st, nil
}

func exists(s *session, name, path string) (bool, *zk.Stat) {
	ok, st, err := s.c.Exists(path)
	if err != nil {
		result("exists."+name, "err=%s", errName(err))
		return false, nil
	}
	if !ok {
		result("exists."+name, "false")
		return false, nil
	}
	result("exists."+name, "true %s", statDesc(st))
	return true, st
}

func scenarioAPI(servers []string) {
	step("connect")
	a := mustConnect(servers, "A", "api.connect")
	b := mustConnect(servers, "B", "api.connect")
	pass("api.connect")

	step("create modes")
	c := newCheck("api.create_modes")
	p, err := a.c.Create(root, []byte("root"), 0, world)
	if !c.outcome("create.root", err, "ok") {
		c.done()
		finish()
	}
	_, st, _ := a.c.Exists(root)
	zxidBase = st.Czxid
	node(a, "root", root)
	type mode struct {
		name  string
		path  string
		flags int32
	}
	created := map[string]string{}
	for _, m := range []mode{
		{"persistent", root + "/p", 0},
		{"ephemeral", root + "/e", zk.FlagEphemeral},
		{"sequential", root + "/s-", zk.FlagSequence},
		{"ephemeral_sequential", root + "/es-", zk.FlagEphemeral | zk.FlagSequence},
		{"sequential2", root + "/s-", zk.FlagSequence},
	} {
		p, err = a.c.Create(m.path, []byte(m.name), m.flags, world)
		if c.outcome("create."+m.name, err, "ok") {
			result("create."+m.name+".path", "%s", p)
			created[m.name] = p
			_, st, _ := node(a, m.name, p)
			wantOwner := "none"
			if m.flags&zk.FlagEphemeral != 0 {
				wantOwner = "session:A"
			}
			if st != nil {
				c.expect(ownerName(st.EphemeralOwner) == wantOwner, "%s: owner %s, want %s",
					m.name, ownerName(st.EphemeralOwner), wantOwner)
			}
			if m.flags&zk.FlagSequence != 0 {
				c.expect(len(p) == len(m.path)+10, "%s: name %s has no 10-digit suffix", m.name, p)
			} else {
				c.expect(p == m.path, "%s: created %s", m.name, p)
			}
		}
	}
	if created["sequential"] != "" && created["sequential2"] != "" {
		c.expect(created["sequential"] < created["sequential2"], "sequence did not increase: %s then %s",
			created["sequential"], created["sequential2"])
	}
	c.done()

	// The client takes any int32 as create flags: container (4), TTL (5, 6:
	// the createTTL op carries the TTL, plain create has none) and an
	// undefined mode (7), all sent with the plain create op (1). Whatever
	// ZooKeeper makes of them, ringkeeper must make the same.
	step("create flags beyond the client's")
	for _, f := range []struct {
		name  string
		flags int32
	}{{"container", 4}, {"ttl", 5}, {"ttl_sequential", 6}, {"undefined", 7}} {
		path := root + "/flag-" + f.name
		p, err = a.c.Create(path, []byte(f.name), f.flags, world)
		result("create.flag_"+f.name, "%s %s", errName(err), p)
		if err == nil {
			node(a, "flag_"+f.name, p)
		}
	}
	// A container is reaped once its last child goes (the driver sets
	// znode.container.checkIntervalMs=1000); a node made by the plain
	// create op with the container flag, if any, is watched for 4 s.
	if ok, _, _ := a.c.Exists(root + "/flag-container"); ok {
		_, err = a.c.Create(root+"/flag-container/child", nil, 0, world)
		result("container.child_create", "%s", errName(err))
		err = a.c.Delete(root+"/flag-container/child", -1)
		result("container.child_delete", "%s", errName(err))
		gone := false
		for deadline := time.Now().Add(4 * time.Second); !gone && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			ok, _, err := a.c.Exists(root + "/flag-container")
			gone = err == nil && !ok
		}
		result("container.reaped_within_4s", "%v", gone)
	}

	step("create errors")
	c = newCheck("api.create_errors")
	_, err = a.c.Create(root+"/p", []byte("again"), 0, world)
	c.outcome("create.existing", err, "NodeExists")
	_, err = a.c.Create(root+"/missing/x", nil, 0, world)
	c.outcome("create.no_parent", err, "NoNode")
	_, err = a.c.Create(root+"/missing/x-", nil, zk.FlagSequence, world)
	c.outcome("create.sequential_no_parent", err, "NoNode")
	_, err = a.c.Create(root+"/e/child", nil, 0, world)
	c.outcome("create.under_ephemeral", err, "NoChildrenForEphemerals")
	_, err = b.c.Create(root+"/e", nil, zk.FlagEphemeral, world)
	c.outcome("create.existing_ephemeral_other_session", err, "NodeExists")
	c.done()

	step("get and set")
	c = newCheck("api.get_set_versions")
	data, st, err := a.c.Get(root + "/p")
	c.expect(err == nil && string(data) == "persistent" && st.Version == 0,
		"get /p: %s %q %s", errName(err), data, statDesc(st))
	st, err = a.c.Set(root+"/p", []byte("p1"), 0)
	if c.outcome("set.matching_version", err, "ok") {
		result("set.matching_version.stat", "%s", statDesc(st))
		result("zxid.set.matching_version", "%s", zxids(st))
		c.expect(st.Version == 1, "version after set: %d", st.Version)
	}
	_, err = a.c.Set(root+"/p", []byte("p2"), 0)
	c.outcome("set.stale_version", err, "BadVersion")
	_, err = a.c.Set(root+"/p", []byte("p2"), 7)
	c.outcome("set.future_version", err, "BadVersion")
	st, err = b.c.Set(root+"/p", []byte("p3"), -1)
	if c.outcome("set.any_version", err, "ok") {
		c.expect(st.Version == 2, "version after set -1: %d", st.Version)
	}
	_, err = a.c.Set(root+"/missing", []byte("x"), -1)
	c.outcome("set.missing", err, "NoNode")
	_, _, err = a.c.Get(root + "/missing")
	c.outcome("get.missing", err, "NoNode")
	// Only -1 means any version.
	_, err = a.c.Set(root+"/p", []byte("p2"), -2)
	result("set.version_minus_2", "%s", errName(err))
	err = a.c.Delete(root+"/p", -2)
	result("delete.version_minus_2", "%s", errName(err))
	_, err = a.c.Multi(&zk.CheckVersionRequest{Path: root + "/p", Version: -1})
	result("check.version_minus_1", "%s", errName(err))
	data, _, _ = node(b, "p_after_sets", root+"/p")
	c.expect(string(data) == "p3", "data after sets: %q", data)
	c.done()

	// nil data goes as a null buffer (-1), []byte{} as an empty one.
	step("null and empty data")
	c = newCheck("api.null_and_empty_data")
	_, err = a.c.Create(root+"/null", nil, 0, world)
	c.outcome("create.null_data", err, "ok")
	_, err = a.c.Create(root+"/empty", []byte{}, 0, world)
	c.outcome("create.empty_data", err, "ok")
	dn, stn, _ := node(a, "null", root+"/null")
	de, ste, _ := node(a, "empty", root+"/empty")
	c.expect(len(dn) == 0 && len(de) == 0 && stn != nil && ste != nil &&
		stn.DataLength == 0 && ste.DataLength == 0, "null/empty data read back with length")
	_, err = a.c.Set(root+"/empty", nil, -1)
	c.outcome("set.null_data", err, "ok")
	node(a, "empty_after_null_set", root+"/empty")
	c.done()

	step("delete")
	c = newCheck("api.delete")
	err = a.c.Delete(root, -1)
	c.outcome("delete.not_empty", err, "NotEmpty")
	err = a.c.Delete(root+"/p", 1)
	c.outcome("delete.stale_version", err, "BadVersion")
	err = a.c.Delete(root+"/missing", -1)
	c.outcome("delete.missing", err, "NoNode")
	err = a.c.Delete(root+"/p", 2)
	c.outcome("delete.matching_version", err, "ok")
	ok, _ := exists(a, "deleted_p", root+"/p")
	c.expect(!ok, "/p exists after its delete")
	err = b.c.Delete(root+"/null", -1)
	c.outcome("delete.any_version", err, "ok")
	c.done()

	step("exists and children")
	c = newCheck("api.exists_children")
	ok, st, err = a.c.Exists(root + "/missing")
	result("exists.missing", "%v %s", ok, errName(err))
	c.expect(err == nil && !ok, "exists on a missing node: %v %s", ok, errName(err))
	ok, _ = exists(b, "ephemeral", root+"/e")
	c.expect(ok, "the ephemeral is not seen by another session")
	kids, st, err := a.c.Children(root)
	if c.outcome("children.root", err, "ok") {
		result("children.root.names", "%s", sortedList(kids))
		result("children.root.stat", "%s", statDesc(st))
		result("zxid.children.root", "%s", zxids(st))
		c.expect(int(st.NumChildren) == len(kids), "numChildren %d, %d names", st.NumChildren, len(kids))
	}
	kids, _, err = a.c.Children(root + "/e")
	c.outcome("children.leaf", err, "ok")
	c.expect(len(kids) == 0, "a leaf has children %v", kids)
	_, _, err = a.c.Children(root + "/missing")
	c.outcome("children.missing", err, "NoNode")
	c.done()

	scenarioWatches(a, b)
	scenarioMulti(a, b)
	scenarioACL(servers, a, b)
	scenarioACLEncoding(servers, a, b)
	scenarioPaths(a, b)

	step("sync")
	c = newCheck("api.sync")
	p, err = a.c.Sync(root)
	c.outcome("sync.existing", err, "ok")
	result("sync.existing.path", "%s", p)
	c.expect(p == root, "sync answered path %q", p)
	p, err = a.c.Sync(root + "/missing")
	result("sync.missing", "%s %s", errName(err), p)
	// The answer repeats the path as the server encodes strings.
	p, err = a.c.Sync(root + "/zo\u00eb\ue000\U0001F600")
	result("sync.beyond_ascii", "%s %q", errName(err), p)
	c.done()

	scenarioEphemeralsAfterClose(servers, b)
	scenarioBigValues(servers)
	scenarioWatchesAcrossReconnect(servers, b)
	scenarioSessionExpiry(servers, b)

	step("final state")
	c = newCheck("api.ephemerals_of_closed_sessions")
	a.close()
	f := mustConnect(servers, "F", "api.ephemerals_of_closed_sessions")
	kids, st, err = f.c.Children(root)
	if c.outcome("children.final", err, "ok") {
		result("children.final.names", "%s", sortedList(kids))
		result("children.final.stat", "%s", statDesc(st))
		result("zxid.children.final", "%s", zxids(st))
		for _, k := range kids {
			c.expect(k != "e" && !strings.HasPrefix(k, "es-"), "A's ephemeral %s outlived A", k)
		}
	}
	c.done()
	b.close()
	f.close()
}

func scenarioWatches(a, b *session) {
	step("watches")
	w := root + "/w"
	if _, err := a.c.Create(w, []byte("0"), 0, world); err != nil {
		fail("api.watch_data", "create %s: %s", w, errName(err))
		return
	}
	mark := a.eventCount()

	c := newCheck("api.watch_data")
	_, _, chData, err := a.c.GetW(w)
	_, _, chData2, err2 := a.c.GetW(w) // the same watch twice: one event
	ok, _, chNew, err3 := a.c.ExistsW(w + "-new")
	c.expect(err == nil && err2 == nil && err3 == nil && !ok,
		"setting watches: %s %s %s exists=%v", errName(err), errName(err2), errName(err3), ok)
	_, err = b.c.Set(w, []byte("1"), -1)
	ev, got := waitEvent(chData)
	result("watch.data", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeDataChanged && ev.Path == w, "data watch: %s", evDesc(ev, got))
	ev, got = waitEvent(chData2)
	c.expect(got && ev.Type == zk.EventNodeDataChanged && ev.Path == w,
		"second data watch on the same path: %s", evDesc(ev, got))
	c.done()

	// The client hands a NodeDataChanged to the path's child watches too
	// (its recvLoop), so the child watch is set after the data event.
	c = newCheck("api.watch_children")
	_, _, chKids, err := a.c.ChildrenW(w)
	c.expect(err == nil, "child watch: %s", errName(err))
	_, err = b.c.Create(w+"/c", []byte("c"), 0, world)
	c.outcome("watch.children.create", err, "ok")
	ev, got = waitEvent(chKids)
	result("watch.children", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeChildrenChanged && ev.Path == w, "child watch: %s",
		evDesc(ev, got))
	c.done()

	c = newCheck("api.watch_exists_created")
	_, err = b.c.Create(w+"-new", nil, 0, world)
	c.outcome("watch.exists.create", err, "ok")
	ev, got = waitEvent(chNew)
	result("watch.exists_created", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeCreated && ev.Path == w+"-new", "exists watch: %s",
		evDesc(ev, got))
	c.done()

	// An exists watch on a node that exists, and a data and a child watch
	// on one node that is then deleted: ZooKeeper sends that node's
	// NodeDeleted once (the client hands it to both watches), then
	// NodeChildrenChanged for its parent.
	c = newCheck("api.watch_deleted")
	ok, _, chGone, err := a.c.ExistsW(w + "-new")
	c.expect(err == nil && ok, "exists watch on an existing node: %v %s", ok, errName(err))
	_, _, chCData, err := a.c.GetW(w + "/c")
	_, _, chCKids, err2 := a.c.ChildrenW(w + "/c")
	_, _, chKids, err3 = a.c.ChildrenW(w)
	c.expect(err == nil && err2 == nil && err3 == nil, "watches on %s/c: %s %s %s", w,
		errName(err), errName(err2), errName(err3))
	err = b.c.Delete(w+"-new", -1)
	c.outcome("watch.deleted.delete_new", err, "ok")
	ev, got = waitEvent(chGone)
	result("watch.exists_deleted", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeDeleted && ev.Path == w+"-new", "exists watch: %s",
		evDesc(ev, got))
	err = b.c.Delete(w+"/c", -1)
	c.outcome("watch.deleted.delete_child", err, "ok")
	for _, x := range []struct {
		name string
		ch   <-chan zk.Event
		typ  zk.EventType
		path string
	}{
		{"data", chCData, zk.EventNodeDeleted, w + "/c"},
		{"children", chCKids, zk.EventNodeDeleted, w + "/c"},
		{"parent", chKids, zk.EventNodeChildrenChanged, w},
	} {
		ev, got = waitEvent(x.ch)
		result("watch.deleted."+x.name, "%s", evDesc(ev, got))
		c.expect(got && ev.Type == x.typ && ev.Path == x.path, "%s watch: %s", x.name, evDesc(ev, got))
	}
	c.done()

	// Every watch above has fired: these changes must not send anything.
	c = newCheck("api.watch_one_shot")
	_, err = b.c.Set(w, []byte("2"), -1)
	c.outcome("watch.one_shot.set", err, "ok")
	_, err = b.c.Create(w+"/d", nil, 0, world)
	c.outcome("watch.one_shot.create", err, "ok")
	_, err = b.c.Create(w+"-new", nil, 0, world)
	c.outcome("watch.one_shot.create_new", err, "ok")
	err = a.barrier(w)
	c.expect(err == nil, "sync then exists: %s", errName(err))
	evs := a.eventsFrom(mark)
	result("watch.events", "%s", eventsDesc(evs))
	want := []string{
		"EventNodeDataChanged:" + w,
		"EventNodeChildrenChanged:" + w,
		"EventNodeCreated:" + w + "-new",
		"EventNodeDeleted:" + w + "-new",
		"EventNodeDeleted:" + w + "/c",
		"EventNodeChildrenChanged:" + w,
	}
	wantDesc := "[" + strings.Join(want, ",") + "]"
	c.expect(eventsDesc(evs) == wantDesc, "events received %s, want %s", eventsDesc(evs), wantDesc)
	c.expect(b.eventCount() == 0, "session B, which set no watch, got %s", eventsDesc(b.eventsFrom(0)))
	c.done()

	// An exists watch on a node that exists is a data watch; a setData
	// with the same data fires it too.
	c = newCheck("api.watch_exists_data")
	ok, _, chEx, err := a.c.ExistsW(w)
	c.expect(err == nil && ok, "exists watch on %s: %v %s", w, ok, errName(err))
	_, err = b.c.Set(w, []byte("2"), -1)
	c.outcome("watch.exists_data.set_same_data", err, "ok")
	ev, got = waitEvent(chEx)
	result("watch.exists_data", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeDataChanged && ev.Path == w, "exists watch: %s",
		evDesc(ev, got))
	c.done()
}

func multiDesc(rs []zk.MultiResponse, err error) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		s := errName(r.Error)
		if r.String != "" {
			s += ":" + r.String
		}
		if r.Stat != nil {
			s += ":" + statDesc(r.Stat)
		}
		parts[i] = s
	}
	return fmt.Sprintf("err=%s [%s]", errName(err), strings.Join(parts, " | "))
}

func scenarioMulti(a, b *session) {
	step("multi")
	m := root + "/m"
	if _, err := a.c.Create(m, nil, 0, world); err != nil {
		fail("api.multi_ok", "create %s: %s", m, errName(err))
		return
	}
	_, _ = a.c.Create(m+"/gone", nil, 0, world)
	_, mst, _ := a.c.Exists(m)

	c := newCheck("api.multi_ok")
	rs, err := a.c.Multi(
		&zk.CreateRequest{Path: m + "/1", Data: []byte("one"), Acl: world, Flags: 0},
		&zk.CreateRequest{Path: m + "/s-", Data: []byte("seq"), Acl: world, Flags: zk.FlagSequence},
		&zk.SetDataRequest{Path: m + "/1", Data: []byte("uno"), Version: 0},
		&zk.CheckVersionRequest{Path: m, Version: mst.Version},
		&zk.DeleteRequest{Path: m + "/gone", Version: -1},
		&zk.CreateRequest{Path: m + "/1/child", Data: nil, Acl: world, Flags: zk.FlagEphemeral},
	)
	result("multi.ok", "%s", multiDesc(rs, err))
	c.expect(err == nil && len(rs) == 6, "multi: %s", multiDesc(rs, err))
	for i, r := range rs {
		c.expect(r.Error == nil, "op %d: %s", i, errName(r.Error))
	}
	_, st1, _ := node(a, "multi_1", m+"/1")
	_, stc, _ := node(a, "multi_1_child", m+"/1/child")
	kids, _, _ := a.c.Children(m)
	result("multi.ok.children", "%s", sortedList(kids))
	if st1 != nil && stc != nil {
		c.expect(st1.Czxid == st1.Mzxid && st1.Czxid == stc.Czxid,
			"the ops of one multi have different zxids: %s / %s", zxids(st1), zxids(stc))
	}
	ok, _, _ := a.c.Exists(m + "/gone")
	c.expect(!ok, "the multi's delete did not happen")
	c.done()

	// A failed multi changes nothing; ZooKeeper 3.8 answers ok (0) for the
	// ops before the failing one, its error for it, RuntimeInconsistency
	// (-2, which this client names ErrUnknown) for the ops after it.
	c = newCheck("api.multi_fail_middle")
	rs, err = b.c.Multi(
		&zk.CreateRequest{Path: m + "/2", Data: []byte("two"), Acl: world},
		&zk.SetDataRequest{Path: m + "/1", Data: []byte("x"), Version: 0},
		&zk.CreateRequest{Path: m + "/3", Data: []byte("three"), Acl: world},
	)
	result("multi.fail_middle", "%s", multiDesc(rs, err))
	c.expect(err == zk.ErrBadVersion && len(rs) == 3 && rs[0].Error == nil &&
		rs[1].Error == zk.ErrBadVersion && rs[2].Error == zk.ErrUnknown, "multi: %s", multiDesc(rs, err))
	for _, p := range []string{m + "/2", m + "/3"} {
		ok, _, _ := a.c.Exists(p)
		c.expect(!ok, "%s exists after a failed multi", p)
	}
	data, _, _ := node(a, "multi_1_after_failed", m+"/1")
	c.expect(string(data) == "uno", "data after a failed multi: %q", data)
	c.done()

	c = newCheck("api.multi_fail_first")
	rs, err = a.c.Multi(
		&zk.DeleteRequest{Path: m + "/missing", Version: -1},
		&zk.CreateRequest{Path: m + "/4", Acl: world},
	)
	result("multi.fail_first", "%s", multiDesc(rs, err))
	c.expect(err == zk.ErrNoNode && len(rs) == 2 && rs[0].Error == zk.ErrNoNode &&
		rs[1].Error == zk.ErrUnknown, "multi: %s", multiDesc(rs, err))
	c.done()

	c = newCheck("api.multi_fail_last")
	rs, err = a.c.Multi(
		&zk.CreateRequest{Path: m + "/5", Acl: world},
		&zk.CheckVersionRequest{Path: m + "/1", Version: 0},
	)
	result("multi.fail_last", "%s", multiDesc(rs, err))
	c.expect(err == zk.ErrBadVersion && len(rs) == 2 && rs[0].Error == nil &&
		rs[1].Error == zk.ErrBadVersion, "multi: %s", multiDesc(rs, err))
	rs, err = a.c.Multi(
		&zk.CreateRequest{Path: m + "/6", Acl: world},
		&zk.CreateRequest{Path: m + "/6", Acl: world},
	)
	result("multi.fail_duplicate", "%s", multiDesc(rs, err))
	c.expect(err == zk.ErrNodeExists && len(rs) == 2 && rs[0].Error == nil &&
		rs[1].Error == zk.ErrNodeExists, "multi: %s", multiDesc(rs, err))
	rs, err = a.c.Multi(
		&zk.CreateRequest{Path: m + "/7", Acl: world},
		&zk.DeleteRequest{Path: m, Version: -1},
	)
	result("multi.fail_not_empty", "%s", multiDesc(rs, err))
	c.expect(err == zk.ErrNotEmpty && len(rs) == 2, "multi: %s", multiDesc(rs, err))
	c.done()

	c = newCheck("api.multi_empty_and_create_delete")
	rs, err = a.c.Multi()
	result("multi.empty", "%s", multiDesc(rs, err))
	c.expect(err == nil && len(rs) == 0, "empty multi: %s", multiDesc(rs, err))
	rs, err = a.c.Multi(
		&zk.CreateRequest{Path: m + "/tmp", Acl: world},
		&zk.DeleteRequest{Path: m + "/tmp", Version: 0},
	)
	result("multi.create_delete", "%s", multiDesc(rs, err))
	c.expect(err == nil && len(rs) == 2, "create then delete: %s", multiDesc(rs, err))
	kids, st, _ := a.c.Children(m)
	result("multi.final.children", "%s", sortedList(kids))
	result("multi.final.stat", "%s", statDesc(st))
	result("zxid.multi.final", "%s", zxids(st))
	c.done()

	// A failed multi fires no watch; a multi that succeeds fires each once.
	c = newCheck("api.multi_watches")
	mark := a.eventCount()
	_, _, chData, err := a.c.GetW(m + "/1")
	_, _, chKids, err2 := a.c.ChildrenW(m)
	c.expect(err == nil && err2 == nil, "watches: %s %s", errName(err), errName(err2))
	rs, err = b.c.Multi(
		&zk.SetDataRequest{Path: m + "/1", Data: []byte("dos"), Version: -1},
		&zk.CreateRequest{Path: m + "/8", Acl: world},
		&zk.CheckVersionRequest{Path: m + "/missing", Version: 0},
	)
	result("multi.watches.failed", "%s", multiDesc(rs, err))
	c.expect(err == zk.ErrNoNode, "check on a missing node: %s", multiDesc(rs, err))
	err = a.barrier(m)
	c.expect(err == nil, "sync then exists: %s", errName(err))
	evs := a.eventsFrom(mark)
	result("multi.watches.after_failed", "%s", eventsDesc(evs))
	c.expect(len(evs) == 0, "a failed multi fired %s", eventsDesc(evs))
	rs, err = b.c.Multi(
		&zk.SetDataRequest{Path: m + "/1", Data: []byte("tres"), Version: -1},
		&zk.CreateRequest{Path: m + "/9", Acl: world},
		&zk.SetDataRequest{Path: m + "/1", Data: []byte("cuatro"), Version: -1},
	)
	result("multi.watches.ok", "%s", multiDesc(rs, err))
	c.expect(err == nil, "multi: %s", multiDesc(rs, err))
	ev, got := waitEvent(chData)
	c.expect(got && ev.Type == zk.EventNodeDataChanged, "data watch: %s", evDesc(ev, got))
	ev, got = waitEvent(chKids)
	c.expect(got && ev.Type == zk.EventNodeChildrenChanged, "child watch: %s", evDesc(ev, got))
	err = a.barrier(m)
	c.expect(err == nil, "sync then exists: %s", errName(err))
	evs = a.eventsFrom(mark)
	result("multi.watches.events", "%s", eventsDesc(evs))
	c.expect(len(evs) == 2, "events %s, want one data and one child event", eventsDesc(evs))
	node(a, "multi_1_after_watched", m+"/1")
	// A node created and deleted by one multi: an exists watch on it fires
	// for the create; a data watch on its parent's child set once.
	mark = a.eventCount()
	ok, _, chTmp, err := a.c.ExistsW(m + "/tmp2")
	_, _, chKids, err2 = a.c.ChildrenW(m)
	c.expect(err == nil && err2 == nil && !ok, "watches: %s %s exists=%v", errName(err),
		errName(err2), ok)
	rs, err = b.c.Multi(
		&zk.CreateRequest{Path: m + "/tmp2", Acl: world},
		&zk.DeleteRequest{Path: m + "/tmp2", Version: -1},
	)
	result("multi.watches.create_delete", "%s", multiDesc(rs, err))
	ev, got = waitEvent(chTmp)
	c.expect(got && ev.Type == zk.EventNodeCreated, "exists watch: %s", evDesc(ev, got))
	ev, got = waitEvent(chKids)
	c.expect(got && ev.Type == zk.EventNodeChildrenChanged, "child watch: %s", evDesc(ev, got))
	err = a.barrier(m)
	c.expect(err == nil, "sync then exists: %s", errName(err))
	evs = a.eventsFrom(mark)
	result("multi.watches.create_delete_events", "%s", eventsDesc(evs))
	c.done()
}

func scenarioACL(servers []string, a, b *session) {
	step("acl")
	c := newCheck("api.acl_creator_only")
	err := a.c.AddAuth("digest", []byte("alice:secret"))
	c.outcome("acl.auth_alice", err, "ok")
	ca := root + "/acl-creator"
	_, err = a.c.Create(ca, []byte("mine"), 0, zk.AuthACL(zk.PermAll))
	c.outcome("acl.create_creator_only", err, "ok")
	acl, st, err := a.c.GetACL(ca)
	result("acl.creator_only.acl", "%s %s %s", errName(err), aclDesc(acl), statDesc(st))
	want := aclDesc(zk.DigestACL(zk.PermAll, "alice", "secret"))
	c.expect(aclDesc(acl) == want, "the auth ACL became %s, want %s", aclDesc(acl), want)
	_, _, err = b.c.Get(ca)
	c.outcome("acl.other_get", err, "NoAuth")
	_, err = b.c.Set(ca, []byte("theirs"), -1)
	c.outcome("acl.other_set", err, "NoAuth")
	_, _, err = b.c.Children(ca)
	c.outcome("acl.other_children", err, "NoAuth")
	_, err = b.c.Create(ca+"/x", nil, 0, world)
	c.outcome("acl.other_create_child", err, "NoAuth")
	_, err = b.c.SetACL(ca, world, -1)
	c.outcome("acl.other_set_acl", err, "NoAuth")
	acl, _, err = b.c.GetACL(ca)
	result("acl.other_get_acl", "%s %s", errName(err), aclDesc(acl))
	ok, _, err := b.c.Exists(ca)
	result("acl.other_exists", "%v %s", ok, errName(err))
	c.expect(ok && err == nil, "exists needs no permission: %v %s", ok, errName(err))
	c.done()

	c = newCheck("api.acl_other_digest")
	err = b.c.AddAuth("digest", []byte("bob:secret"))
	c.outcome("acl.auth_bob", err, "ok")
	_, _, err = b.c.Get(ca)
	c.outcome("acl.bob_get", err, "NoAuth")
	// Read and world-read: a reader without ADMIN sees digests with their
	// hash hidden (ZooKeeper 3.6+).
	red := root + "/acl-redacted"
	acl2 := append(zk.DigestACL(zk.PermAll, "alice", "secret"), zk.WorldACL(zk.PermRead)...)
	_, err = a.c.Create(red, []byte("r"), 0, acl2)
	c.outcome("acl.create_redacted", err, "ok")
	acl, _, err = b.c.GetACL(red)
	result("acl.redacted.reader", "%s %s", errName(err), aclDesc(acl))
	acl, _, err = a.c.GetACL(red)
	result("acl.redacted.admin", "%s %s", errName(err), aclDesc(acl))
	c.expect(aclDesc(acl) == aclDesc(acl2), "the admin reads %s, want %s", aclDesc(acl), aclDesc(acl2))
	c.done()

	c = newCheck("api.acl_same_user_other_session")
	cs := mustConnect(servers, "C", "api.acl_same_user_other_session")
	_, _, err = cs.c.Get(ca)
	c.outcome("acl.c_get_before_auth", err, "NoAuth")
	err = cs.c.AddAuth("digest", []byte("alice:secret"))
	c.outcome("acl.c_auth_alice", err, "ok")
	data, _, err := cs.c.Get(ca)
	c.outcome("acl.c_get", err, "ok")
	c.expect(string(data) == "mine", "read %q", data)
	_, err = cs.c.Create(ca+"/child", []byte("c"), 0, world)
	c.outcome("acl.c_create_child", err, "ok")
	cs.close()
	c.done()

	c = newCheck("api.acl_world_read_only")
	ro := root + "/ro"
	_, err = a.c.Create(ro, []byte("ro"), 0, zk.WorldACL(zk.PermRead))
	c.outcome("acl.create_read_only", err, "ok")
	data, _, err = b.c.Get(ro)
	c.outcome("acl.ro_get", err, "ok")
	_, err = b.c.Set(ro, []byte("x"), -1)
	c.outcome("acl.ro_set", err, "NoAuth")
	_, err = a.c.Set(ro, []byte("x"), -1)
	c.outcome("acl.ro_set_by_creator", err, "NoAuth")
	_, err = b.c.Create(ro+"/x", nil, 0, world)
	c.outcome("acl.ro_create_child", err, "NoAuth")
	_, err = b.c.SetACL(ro, world, -1)
	c.outcome("acl.ro_set_acl", err, "NoAuth")
	node(b, "ro", ro)
	// Deleting needs DELETE on the parent, not on the node.
	err = b.c.Delete(ro, -1)
	c.outcome("acl.ro_delete", err, "ok")
	c.done()

	c = newCheck("api.acl_ip")
	ipOK, ipNo := root+"/ip-local", root+"/ip-other"
	_, err = a.c.Create(ipOK, []byte("l"), 0, []zk.ACL{{Perms: zk.PermRead, Scheme: "ip", ID: "127.0.0.1"}})
	c.outcome("acl.create_ip_local", err, "ok")
	_, err = a.c.Create(ipNo, []byte("o"), 0, []zk.ACL{{Perms: zk.PermRead, Scheme: "ip", ID: "10.0.0.0/8"}})
	c.outcome("acl.create_ip_other", err, "ok")
	_, _, err = b.c.Get(ipOK)
	c.outcome("acl.ip_local_get", err, "ok")
	_, _, err = b.c.Get(ipNo)
	c.outcome("acl.ip_other_get", err, "NoAuth")
	c.done()

	c = newCheck("api.acl_invalid")
	d := mustConnect(servers, "D", "api.acl_invalid")
	_, err = d.c.Create(root+"/inv-auth", nil, 0, zk.AuthACL(zk.PermAll))
	c.outcome("acl.invalid.auth_without_auth", err, "InvalidACL")
	_, err = d.c.Create(root+"/inv-digest", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "nocolon"}})
	c.outcome("acl.invalid.digest_id", err, "InvalidACL")
	_, err = d.c.Create(root+"/inv-scheme", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "bogus", ID: "x"}})
	c.outcome("acl.invalid.scheme", err, "InvalidACL")
	_, err = d.c.Create(root+"/inv-ip", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "not-an-ip"}})
	c.outcome("acl.invalid.ip", err, "InvalidACL")
	_, err = d.c.Create(root+"/inv-empty", nil, 0, []zk.ACL{})
	c.outcome("acl.invalid.empty", err, "InvalidACL")
	_, err = d.c.Create(root+"/inv-world", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "world", ID: "someone"}})
	result("acl.invalid.world_id", "%s", errName(err))
	c.done()

	// ACL lists ZooKeeper's providers judge one by one.
	c = newCheck("api.acl_corner_cases")
	anyone := func(perms int32) zk.ACL { return zk.ACL{Perms: perms, Scheme: "world", ID: "anyone"} }
	for _, x := range []struct {
		name string
		acl  []zk.ACL
	}{
		{"duplicates", []zk.ACL{anyone(zk.PermAll), anyone(zk.PermAll)}},
		{"same_id_two_perms", []zk.ACL{anyone(zk.PermRead), anyone(zk.PermAll)}},
		{"perms_0", []zk.ACL{anyone(0)}},
		{"perms_255", []zk.ACL{anyone(0xff)}},
		{"scheme_case", []zk.ACL{{Perms: zk.PermAll, Scheme: "World", ID: "anyone"}}},
		{"digest_three_parts", []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "a:b:c"}}},
		{"digest_empty_hash", []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "a:"}}},
		{"digest_empty_user", []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: ":b"}}},
		{"digest_colon", []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: ":"}}},
		{"ip_cidr", []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.0/8"}}},
		{"ip_cidr_33", []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.1/33"}}},
		{"ip_cidr_0", []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "10.0.0.0/0"}}},
		{"ip_v6", []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "::1"}}},
		{"ip_short", []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "127.1"}}},
		{"auth_with_id", []zk.ACL{{Perms: zk.PermAll, Scheme: "auth", ID: "someone"}}},
		{"auth_and_world", append(zk.AuthACL(zk.PermAll), anyone(zk.PermRead))},
		{"super", []zk.ACL{{Perms: zk.PermAll, Scheme: "super", ID: "x"}}},
	} {
		path := root + "/acl-corner-" + x.name
		_, err := a.c.Create(path, nil, 0, x.acl)
		result("acl.corner."+x.name+".create", "%s", errName(err))
		if err != nil {
			continue
		}
		acl, _, err := a.c.GetACL(path)
		result("acl.corner."+x.name+".acl", "%s %q", errName(err), aclDesc(acl))
		_, _, err = b.c.Get(path)
		result("acl.corner."+x.name+".get", "%s", errName(err))
		switch x.name {
		case "duplicates":
			c.expect(err == nil, "a duplicate world ACL: get %s", errName(err))
		case "perms_0":
			c.expect(err == zk.ErrNoAuth, "no permission at all: get %s", errName(err))
		}
	}
	c.done()

	c = newCheck("api.set_acl_versions")
	sa := root + "/acl-versions"
	_, err = a.c.Create(sa, nil, 0, world)
	c.outcome("acl.versions.create", err, "ok")
	rw := zk.WorldACL(zk.PermRead | zk.PermWrite | zk.PermAdmin)
	_, err = a.c.SetACL(sa, rw, 5)
	c.outcome("acl.set_acl_future_version", err, "BadVersion")
	st, err = a.c.SetACL(sa, rw, 0)
	if c.outcome("acl.set_acl_matching_version", err, "ok") {
		result("acl.set_acl_matching_version.stat", "%s", statDesc(st))
		result("zxid.acl.set_acl_matching_version", "%s", zxids(st))
		c.expect(st.Aversion == 1, "aversion after setACL: %d", st.Aversion)
	}
	_, err = a.c.SetACL(sa, rw, 0)
	c.outcome("acl.set_acl_stale_version", err, "BadVersion")
	st, err = a.c.SetACL(sa, zk.WorldACL(zk.PermRead|zk.PermAdmin), -1)
	if c.outcome("acl.set_acl_any_version", err, "ok") {
		c.expect(st.Aversion == 2 && st.Version == 0, "after setACL -1: %s", statDesc(st))
	}
	acl, st, err = a.c.GetACL(sa)
	result("acl.versions.get_acl", "%s %s %s", errName(err), aclDesc(acl), statDesc(st))
	c.expect(aclDesc(acl) == aclDesc(zk.WorldACL(zk.PermRead|zk.PermAdmin)), "ACL now %s", aclDesc(acl))
	_, err = a.c.Set(sa, []byte("x"), -1)
	c.outcome("acl.versions.set_without_write", err, "NoAuth")
	_, err = a.c.SetACL(sa, []zk.ACL{{Perms: zk.PermAll, Scheme: "bogus", ID: "x"}}, -1)
	c.outcome("acl.set_acl_invalid", err, "InvalidACL")
	_, err = a.c.SetACL(root+"/missing", world, -1)
	c.outcome("acl.set_acl_missing", err, "NoNode")
	_, _, err = a.c.GetACL(root + "/missing")
	c.outcome("acl.get_acl_missing", err, "NoNode")
	c.done()

	// An auth scheme the server does not have: ZooKeeper answers AuthFailed
	// and closes the connection; the session goes on on a new one.
	step("auth with an unknown scheme")
	c = newCheck("api.auth_unknown_scheme")
	mark := d.stateCount()
	id := d.c.SessionID()
	err = d.c.AddAuth("nosuchscheme", []byte("x"))
	result("auth.unknown_scheme", "%s", errName(err))
	reconnected := d.waitState(zk.StateDisconnected, mark, eventWait) &&
		d.waitState(zk.StateHasSession, mark, connectWait)
	result("auth.unknown_scheme.reconnected", "%v", reconnected)
	if reconnected {
		result("auth.unknown_scheme.same_session", "%v", d.c.SessionID() == id)
	}
	_, _, err = d.c.Get(root)
	c.outcome("auth.unknown_scheme.then_get", err, "ok")
	err = d.c.AddAuth("digest", []byte("nocolon"))
	result("auth.digest_without_colon", "%s", errName(err))
	d.close()
	c.done()
}

// ACL ids as bytes: the client sends ACL ids, auth data and digest user
// names as given (any bytes); ZooKeeper decodes strings as Java does
// (invalid UTF-8 becomes U+FFFD) and encodes them back char by char (a
// character outside the BMP as two 3-byte surrogates).
func scenarioACLEncoding(servers []string, a, b *session) {
	step("acl encodings")
	c := newCheck("api.acl_encodings")
	u := mustConnect(servers, "U", "api.acl_encodings")
	for _, x := range []struct {
		name string
		auth string
	}{
		{"bmp", "zo\u00eb\u2603:pw"},
		{"astral", "\U0001F600:pw"},
		{"invalid_utf8", "\xff\xfeuser:pw"},
	} {
		err := u.c.AddAuth("digest", []byte(x.auth))
		result("acl.encoding."+x.name+".auth", "%s", errName(err))
		path := root + "/acl-enc-" + x.name
		_, err = u.c.Create(path, []byte(x.name), 0, zk.AuthACL(zk.PermAll))
		result("acl.encoding."+x.name+".create", "%s", errName(err))
		acl, _, err := u.c.GetACL(path)
		result("acl.encoding."+x.name+".acl", "%s %q", errName(err), aclDesc(acl))
		_, _, err = u.c.Get(path)
		c.expect(err == nil, "%s: the creator cannot read its node: %s", x.name, errName(err))
	}
	for _, x := range []struct {
		name string
		id   string
	}{
		{"bmp", "zo\u00eb:abc"},
		{"astral", "\U0001F600:abc"},
		{"invalid_utf8", "\xff:abc"},
	} {
		path := root + "/acl-id-" + x.name
		_, err := a.c.Create(path, nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: x.id},
			{Perms: zk.PermRead, Scheme: "world", ID: "anyone"}})
		result("acl.id."+x.name+".create", "%s", errName(err))
		acl, _, err := a.c.GetACL(path)
		result("acl.id."+x.name+".acl", "%s %q", errName(err), aclDesc(acl))
		acl, _, err = b.c.GetACL(path)
		result("acl.id."+x.name+".acl_redacted", "%s %q", errName(err), aclDesc(acl))
	}
	// An ip "auth" is not one an auth ACL can name.
	err := u.c.AddAuth("ip", []byte("ignored"))
	result("acl.auth_ip", "%s", errName(err))
	v := mustConnect(servers, "V", "api.acl_encodings")
	err = v.c.AddAuth("ip", []byte("ignored"))
	result("acl.auth_ip_only", "%s", errName(err))
	_, err = v.c.Create(root+"/acl-ip-auth", nil, 0, zk.AuthACL(zk.PermAll))
	c.outcome("acl.auth_acl_with_ip_only", err, "InvalidACL")
	// Deleting needs DELETE on the parent.
	nd := root + "/no-delete"
	_, err = a.c.Create(nd, nil, 0, zk.WorldACL(zk.PermAll&^zk.PermDelete))
	c.outcome("acl.no_delete.create", err, "ok")
	_, err = b.c.Create(nd+"/child", nil, 0, world)
	c.outcome("acl.no_delete.create_child", err, "ok")
	err = b.c.Delete(nd+"/child", -1)
	c.outcome("acl.no_delete.delete_child", err, "NoAuth")
	u.close()
	v.close()
	c.done()
}

// The nodes ZooKeeper makes itself, and paths at the edge of what the
// client lets through: it checks paths itself, but not for every
// character ZooKeeper refuses.
func scenarioPaths(a, b *session) {
	step("special nodes")
	c := newCheck("api.special_nodes")
	kids, st, err := a.c.Children("/")
	result("special.root.children", "%s %s %s", errName(err), sortedList(kids), statDesc(st))
	c.expect(err == nil && strings.Contains(sortedList(kids), "zookeeper"), "/ lists %v", kids)
	kids, st, err = a.c.Children("/zookeeper")
	result("special.zookeeper.children", "%s %s %s", errName(err), sortedList(kids), statDesc(st))
	for _, p := range []string{"/zookeeper", "/zookeeper/config", "/zookeeper/quota"} {
		data, st, err := a.c.Get(p)
		result("special.get"+strings.ReplaceAll(p, "/", "."), "%s %s %s", errName(err),
			dataDesc(data), statDesc(st))
		acl, _, err := a.c.GetACL(p)
		result("special.acl"+strings.ReplaceAll(p, "/", "."), "%s %s", errName(err), aclDesc(acl))
	}
	_, err = b.c.Create("/zookeeper/go-x", nil, 0, world)
	result("special.create_under_zookeeper", "%s", errName(err))
	_, err = b.c.Set("/zookeeper/config", []byte("x"), -1)
	result("special.set_config", "%s", errName(err))
	err = b.c.Delete("/zookeeper/config", -1)
	result("special.delete_config", "%s", errName(err))
	err = b.c.Delete("/zookeeper", -1)
	result("special.delete_zookeeper", "%s", errName(err))
	p, err := b.c.Create("/go-seq-", nil, zk.FlagSequence, world)
	result("special.sequential_at_root", "%s %s", errName(err), p)
	c.done()

	step("path edges")
	c = newCheck("api.path_edges")
	dir := root + "/paths"
	_, err = a.c.Create(dir, nil, 0, world)
	c.outcome("path.create_dir", err, "ok")
	// A sequential node with an empty name before its number.
	p, err = a.c.Create(dir+"/", nil, zk.FlagSequence, world)
	result("path.sequential_trailing_slash", "%s %s", errName(err), p)
	for _, x := range []struct {
		name, path string
		valid      bool // for ZooKeeper's PathUtils.validatePath
	}{
		{"latin1", dir + "/zo\u00eb", true},
		{"bmp", dir + "/snow\u2603man", true},
		{"nbsp", dir + "/a\u00a0b", true},
		{"private_use", dir + "/pu\ue000", false},
		{"astral", dir + "/smile\U0001F600", false},
		{"dot_name", dir + "/.x", true},
		{"dots_name", dir + "/..x", true},
	} {
		p, err := a.c.Create(x.path, []byte(x.name), 0, world)
		result("path."+x.name+".create", "%s %q", errName(err), p)
		if x.valid {
			c.expect(err == nil && p == x.path, "%s: created %q (%s)", x.name, p, errName(err))
		} else {
			c.expect(err != nil, "%s: created %q", x.name, p)
		}
		ok, _, err := a.c.Exists(x.path)
		result("path."+x.name+".exists", "%v %s", ok, errName(err))
	}
	kids, st, err = b.c.Children(dir)
	result("path.children", "%s %q %s", errName(err), sortedList(kids), statDesc(st))
	c.done()
}

// Watches survive a new connection: the client sends them again
// (setWatches, with the last zxid it saw) and they fire for what changes
// after, once. The connection is closed by the server, by a request over
// jute.maxbuffer (see scenarioBigValues).
func scenarioWatchesAcrossReconnect(servers []string, b *session) {
	step("watches across a reconnect")
	c := newCheck("api.watches_across_reconnect")
	h := mustConnect(servers, "H", "api.watches_across_reconnect")
	// Three nodes: the client hands a NodeDataChanged to the path's child
	// watches too, so the child watch is on a node of its own.
	sw, kids := root+"/sw", root+"/sw-kids"
	_, err := b.c.Create(sw, []byte("0"), 0, world)
	c.outcome("reconnect.create", err, "ok")
	_, err = b.c.Create(kids, nil, 0, world)
	c.outcome("reconnect.create_kids", err, "ok")
	_, _, chData, err := h.c.GetW(sw)
	ok, _, chNew, err2 := h.c.ExistsW(sw + "-new")
	_, _, chKids, err3 := h.c.ChildrenW(kids)
	c.expect(err == nil && err2 == nil && err3 == nil && !ok, "watches: %s %s %s exists=%v",
		errName(err), errName(err2), errName(err3), ok)
	mark := h.stateCount()
	_, err = h.c.Set(root+"/big", make([]byte, 0xfffff+10000), -1)
	result("reconnect.over_limit_set", "%s", errName(err))
	back := h.waitState(zk.StateDisconnected, mark, eventWait) &&
		h.waitState(zk.StateHasSession, mark, connectWait)
	result("reconnect.back", "%v", back)
	c.expect(back, "no new connection: states %s", statesDesc(h.statesFrom(mark)))
	_, err = b.c.Set(sw, []byte("1"), -1)
	c.outcome("reconnect.set", err, "ok")
	ev, got := waitEvent(chData)
	result("reconnect.data_watch", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeDataChanged && ev.Path == sw, "data watch: %s",
		evDesc(ev, got))
	_, err = b.c.Create(sw+"-new", nil, 0, world)
	c.outcome("reconnect.create_new", err, "ok")
	ev, got = waitEvent(chNew)
	result("reconnect.exists_watch", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeCreated && ev.Path == sw+"-new", "exists watch: %s",
		evDesc(ev, got))
	_, err = b.c.Create(kids+"/c", nil, 0, world)
	c.outcome("reconnect.create_child", err, "ok")
	ev, got = waitEvent(chKids)
	result("reconnect.child_watch", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeChildrenChanged && ev.Path == kids, "child watch: %s",
		evDesc(ev, got))
	_, err = b.c.Set(sw, []byte("2"), -1)
	c.outcome("reconnect.set_again", err, "ok")
	err = h.barrier(sw)
	c.expect(err == nil, "sync then exists: %s", errName(err))
	evs := h.eventsFrom(0)
	result("reconnect.events", "%s", eventsDesc(evs))
	c.expect(len(evs) == 3, "events %s, want three", eventsDesc(evs))
	h.close()
	c.done()
}

// A TCP proxy in front of one server that can cut its connections and
// refuse new ones for a while (accepted and closed at once), as a network
// that has gone away.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
}

func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.frozen {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go pipe(c, s)
		go pipe(s, c)
	}
}

func pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) thaw() {
	p.mu.Lock()
	p.frozen = false
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.ln.Close()
	p.freeze()
}

// A session whose client cannot reach the server for longer than its
// timeout expires: the server deletes its ephemerals (another session's
// watch sees it), and when the client comes back it is told the session
// expired (a ConnectResponse with session id 0), its watches end with
// ErrSessionExpired, and this client then starts a new session.
func scenarioSessionExpiry(servers []string, b *session) {
	step("session expiry")
	c := newCheck("api.session_expiry")
	px, err := startProxy(servers[0])
	if err != nil {
		fail("api.session_expiry", "proxy: %v", err)
		return
	}
	defer px.close()
	x := &session{name: "X"}
	// 4 s: the shortest a server with tickTime 2000 grants.
	conn, _, err := zk.Connect([]string{px.addr()}, 4*time.Second, zk.WithEventCallback(x.onEvent),
		zk.WithLogger(logger{"X"}))
	if err == nil {
		x.c = conn
		defer x.close()
	}
	if err != nil || !x.waitState(zk.StateHasSession, 0, connectWait) {
		fail("api.session_expiry", "session X through the proxy: %v, states %s", err,
			statesDesc(x.statesFrom(0)))
		return
	}
	oldID := conn.SessionID()
	sessionNames.Store(oldID, "X")
	eph := root + "/x-eph"
	_, err = x.c.Create(eph, []byte("x"), zk.FlagEphemeral, world)
	c.outcome("expiry.create_ephemeral", err, "ok")
	_, _, chX, err := x.c.GetW(root + "/w")
	c.expect(err == nil, "X's data watch: %s", errName(err))
	ok, st, chB, err := b.c.ExistsW(eph)
	c.expect(err == nil && ok, "B does not see X's ephemeral: %v %s", ok, errName(err))
	if st != nil {
		result("expiry.ephemeral_seen_by_b", "%s", statDesc(st))
	}
	mark := x.stateCount()
	px.freeze()
	started := time.Now()
	ev, got := func() (zk.Event, bool) {
		select {
		case ev, ok := <-chB:
			return ev, ok
		case <-time.After(20 * time.Second):
			return zk.Event{}, false
		}
	}()
	info("X's ephemeral deleted %.1fs after its client lost the server", time.Since(started).Seconds())
	result("expiry.b_watch", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeDeleted && ev.Path == eph,
		"B's watch on X's ephemeral within 20 s: %s", evDesc(ev, got))
	px.thaw()
	expired := x.waitState(zk.StateExpired, mark, 15*time.Second)
	result("expiry.client_told_expired", "%v", expired)
	c.expect(expired, "X's client was not told its session expired: states %s",
		statesDesc(x.statesFrom(mark)))
	ev, got = waitEvent(chX)
	result("expiry.x_watch", "%s %s", evDesc(ev, got), errName(ev.Err))
	c.expect(got && ev.Type == zk.EventNotWatching && ev.Err == zk.ErrSessionExpired,
		"X's watch: %s %s", evDesc(ev, got), errName(ev.Err))
	if expired {
		renewed := poll(connectWait, func() bool {
			return x.c.State() == zk.StateHasSession && x.c.SessionID() != oldID &&
				x.c.SessionID() != 0
		})
		result("expiry.new_session", "%v", renewed)
		c.expect(renewed, "no new session after the expiry: states %s",
			statesDesc(x.statesFrom(mark)))
		if renewed {
			sessionNames.Store(x.c.SessionID(), "X2")
			ok, _, err = x.c.Exists(eph)
			result("expiry.ephemeral_after", "%v %s", ok, errName(err))
			c.expect(err == nil && !ok, "X's ephemeral outlived its session")
		}
	}
	c.done()
}

func scenarioEphemeralsAfterClose(servers []string, b *session) {
	step("ephemerals after close")
	c := newCheck("api.ephemerals_after_close")
	e := mustConnect(servers, "E", "api.ephemerals_after_close")
	eph := root + "/eph"
	_, err := e.c.Create(eph, []byte("e"), zk.FlagEphemeral, world)
	c.outcome("eph.create", err, "ok")
	ephSeq, err := e.c.Create(root+"/eph-s-", []byte("e"), zk.FlagEphemeral|zk.FlagSequence, world)
	c.outcome("eph.create_sequential", err, "ok")
	result("eph.create_sequential.path", "%s", ephSeq)
	ok, st, ch, err := b.c.ExistsW(eph)
	c.expect(err == nil && ok, "B does not see E's ephemeral: %v %s", ok, errName(err))
	if st != nil {
		result("eph.seen_by_b", "%s", statDesc(st))
		c.expect(ownerName(st.EphemeralOwner) == "session:E", "owner %s", ownerName(st.EphemeralOwner))
	}
	e.close()
	ev, got := waitEvent(ch)
	result("eph.watch", "%s", evDesc(ev, got))
	c.expect(got && ev.Type == zk.EventNodeDeleted && ev.Path == eph, "B's watch: %s", evDesc(ev, got))
	err = b.barrier(root)
	c.expect(err == nil, "sync: %s", errName(err))
	for _, p := range []string{eph, ephSeq} {
		ok, _, err = b.c.Exists(p)
		c.expect(err == nil && !ok, "%s: exists=%v %s after its session closed", p, ok, errName(err))
	}
	ok, _ = exists(b, "eph_of_a_still_there", root+"/e")
	c.expect(ok, "A's ephemeral went with E")
	c.done()
}

// Values near jute.maxbuffer (0xfffff = 1,048,575 bytes by default, the
// bound on a request's frame): one well below it, one whose frame is
// exactly the bound, one a byte over, one 500 bytes over (within the 1024
// bytes ZooKeeper allows a record's buffers beyond the bound), one well
// over it. Whatever ZooKeeper does with each (answer, or close the
// connection), ringkeeper must do the same; a session whose connection
// closed goes on on a new connection.
func scenarioBigValues(servers []string) {
	step("big values")
	g := mustConnect(servers, "G", "api.big_values")
	c := newCheck("api.big_values")
	id := g.c.SessionID()
	big := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte((i+int(seed))%26)
		}
		return b
	}
	// A setData request's frame is its data plus the header (8), the path
	// (4 + its length), the data's length (4) and the version (4).
	const path = root + "/big"
	const frameOverhead = 8 + 4 + len(path) + 4 + 4
	if _, err := g.c.Create(path, nil, 0, world); err != nil {
		fail("api.big_values", "create %s: %s", path, errName(err))
		return
	}
	for _, v := range []struct {
		name string
		n    int
	}{
		{"below", 0xfffff - frameOverhead - 2048},
		{"at_limit", 0xfffff - frameOverhead},
		{"limit_plus_1", 0xfffff - frameOverhead + 1},
		{"within_extra", 0xfffff - frameOverhead + 500},
		{"over", 0xfffff + 60000},
	} {
		step("big value " + v.name)
		value := big(v.n, byte(len(v.name)))
		mark := g.stateCount()
		st, err := g.c.Set(path, value, -1)
		result("big."+v.name+".set", "%s", errName(err))
		if err == nil {
			result("big."+v.name+".stat", "%s", statDesc(st))
		}
		// A closed connection shows as Disconnected; wait for the session
		// to come back before reading.
		lost := g.sawState(zk.StateDisconnected, mark)
		if errName(err) == "ConnectionLost" && !lost {
			lost = g.waitState(zk.StateDisconnected, mark, eventWait)
		}
		result("big."+v.name+".connection_lost", "%v", lost)
		if lost {
			back := g.waitState(zk.StateHasSession, mark, connectWait)
			result("big."+v.name+".session_back", "%v", back)
			if !back {
				c.expect(false, "%s: the session did not come back", v.name)
				break
			}
			result("big."+v.name+".same_session", "%v", g.c.SessionID() == id)
		}
		data, st, err := g.c.Get(path)
		result("big."+v.name+".read_back", "%s len=%d written=%v %s", errName(err), len(data),
			bytes.Equal(data, value), statDesc(st))
		if errName(err) != "ok" {
			c.expect(false, "%s: read after the set: %s", v.name, errName(err))
			break
		}
		if v.name == "below" {
			c.expect(bytes.Equal(data, value), "a %d-byte value did not read back", v.n)
		}
	}
	g.close()
	c.done()
}

// ---------------------------------------------------------------------
// Scenario "lock": the client's Lock recipe, several connections with
// several goroutines each, a counter changed only under the lock.

func scenarioLock(servers []string) {
	const conns, perConn, rounds = 4, 3, 20
	const total = conns * perConn * rounds
	step("connect")
	var sessions []*session
	for i := 0; i < conns; i++ {
		sessions = append(sessions, mustConnect(servers, fmt.Sprintf("L%d", i+1), "lock.connect"))
	}
	pass("lock.connect")
	s0 := sessions[0]
	step("setup")
	for _, p := range []string{"/go-lock", "/go-lock/counter"} {
		if _, err := s0.c.Create(p, []byte("0"), 0, world); err != nil {
			fail("lock.setup", "create %s: %s", p, errName(err))
			finish()
		}
	}
	pass("lock.setup")

	var (
		inside, overlaps, holderClash, casConflicts, acquired int32
		errMu                                                 sync.Mutex
		errs                                                  []string
		progress                                              = make([]int32, conns*perConn)
	)
	addErr := func(format string, a ...interface{}) {
		errMu.Lock()
		errs = append(errs, fmt.Sprintf(format, a...))
		errMu.Unlock()
	}
	step("locking")
	start := time.Now()
	var wg sync.WaitGroup
	for ci, s := range sessions {
		for g := 0; g < perConn; g++ {
			wg.Add(1)
			worker := ci*perConn + g
			go func(s *session, worker int) {
				defer wg.Done()
				l := zk.NewLock(s.c, "/go-lock/mutex", world)
				for r := 0; r < rounds; r++ {
					if err := l.Lock(); err != nil {
						addErr("worker %d round %d: Lock: %s", worker, r, errName(err))
						return
					}
					atomic.AddInt32(&acquired, 1)
					if atomic.AddInt32(&inside, 1) != 1 {
						atomic.AddInt32(&overlaps, 1)
					}
					// The server's view: one holder's marker at a time.
					_, err := s.c.Create("/go-lock/holder", []byte(strconv.Itoa(worker)),
						zk.FlagEphemeral, world)
					if err == zk.ErrNodeExists {
						atomic.AddInt32(&holderClash, 1)
					} else if err != nil {
						addErr("worker %d: create holder: %s", worker, errName(err))
					}
					data, st, err := s.c.Get("/go-lock/counter")
					if err != nil {
						addErr("worker %d: get counter: %s", worker, errName(err))
					} else {
						n, _ := strconv.Atoi(string(data))
						time.Sleep(time.Millisecond) // widen the window
						_, err = s.c.Set("/go-lock/counter", []byte(strconv.Itoa(n+1)), st.Version)
						if err == zk.ErrBadVersion {
							atomic.AddInt32(&casConflicts, 1)
						} else if err != nil {
							addErr("worker %d: set counter: %s", worker, errName(err))
						}
					}
					if err == nil || err == zk.ErrBadVersion {
						if err := s.c.Delete("/go-lock/holder", -1); err != nil {
							addErr("worker %d: delete holder: %s", worker, errName(err))
						}
					}
					atomic.AddInt32(&inside, -1)
					if err := l.Unlock(); err != nil {
						addErr("worker %d round %d: Unlock: %s", worker, r, errName(err))
						return
					}
					atomic.StoreInt32(&progress[worker], int32(r+1))
				}
			}(s, worker)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		parts := make([]string, len(progress))
		for i := range progress {
			parts[i] = strconv.Itoa(int(atomic.LoadInt32(&progress[i])))
		}
		fail("lock.all_done", "not done within 120 s; rounds done per worker: %s", strings.Join(parts, ","))
		finish()
	}
	info("%d lock rounds in %.1fs", total, time.Since(start).Seconds())

	c := newCheck("lock.all_done")
	c.expect(len(errs) == 0, "%s", strings.Join(errs, "; "))
	c.expect(atomic.LoadInt32(&acquired) == total, "%d acquisitions, want %d", acquired, total)
	c.done()
	c = newCheck("lock.exclusive")
	c.expect(overlaps == 0, "%d times two holders at once", overlaps)
	c.expect(holderClash == 0, "%d times the holder's marker existed already", holderClash)
	c.done()

	step("read back")
	c = newCheck("lock.no_lost_update")
	data, st, err := s0.c.Get("/go-lock/counter")
	c.expect(err == nil, "get counter: %s", errName(err))
	result("lock.counter", "%s %s", dataDesc(data), statDesc(st))
	c.expect(string(data) == strconv.Itoa(total), "counter %q, want %d", data, total)
	c.expect(casConflicts == 0, "%d conditional sets under the lock failed", casConflicts)
	c.done()
	c = newCheck("lock.released")
	kids, st, err := s0.c.Children("/go-lock/mutex")
	result("lock.mutex", "%s %s %s", errName(err), sortedList(kids), statDesc(st))
	c.expect(err == nil && len(kids) == 0, "lock nodes left: %s %v", errName(err), kids)
	ok, _, err := s0.c.Exists("/go-lock/holder")
	result("lock.holder_left", "%v %s", ok, errName(err))
	c.expect(err == nil && !ok, "the holder marker is left")
	kids, st, err = s0.c.Children("/go-lock")
	result("lock.parent", "%s %s %s", errName(err), sortedList(kids), statDesc(st))
	c.done()
	for _, s := range sessions {
		s.close()
	}
}

// ---------------------------------------------------------------------
// Scenario "ensemble": one session per member, concurrent writers through
// every member, then every member's view after a sync.

func seqNumber(name string) (int, bool) {
	i := strings.LastIndex(name, "-")
	if i < 0 || len(name)-i-1 != 10 {
		return 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	return n, err == nil
}

func scenarioEnsemble(servers []string) {
	const writers, perWriter = 4, 200
	const total = writers * perWriter
	const base, seqDir, counter = "/go-ens", "/go-ens/seq", "/go-ens/counter"
	step("connect")
	members := make([]*session, len(servers))
	for i, srv := range servers {
		members[i] = mustConnect([]string{srv}, fmt.Sprintf("M%d", i+1), "ens.connect")
		if got := members[i].c.Server(); got != srv {
			fail("ens.connect", "session M%d is on %s, not %s", i+1, got, srv)
			finish()
		}
	}
	pass("ens.connect")

	step("setup")
	c := newCheck("ens.setup")
	for _, p := range []string{base, seqDir} {
		_, err := members[0].c.Create(p, nil, 0, world)
		c.expect(err == nil, "create %s: %s", p, errName(err))
	}
	_, err := members[0].c.Create(counter, []byte("0"), 0, world)
	c.expect(err == nil, "create %s: %s", counter, errName(err))
	for i, m := range members {
		_, err := m.c.Sync(base)
		ok, _, err2 := m.c.Exists(counter)
		c.expect(err == nil && err2 == nil && ok, "member %d after sync: %s %s exists=%v", i+1,
			errName(err), errName(err2), ok)
	}
	c.done()
	if len(c.probs) > 0 {
		finish()
	}

	// Watches set through every member fire for writes through another:
	// the flag's creation (through the last member), then the writers'
	// first increment of the counter.
	step("watches across members")
	flag := base + "/flag"
	watchErrs := newCheck("ens.watches_across_members")
	type memberWatches struct{ created, changed <-chan zk.Event }
	mw := make([]memberWatches, len(members))
	for i, m := range members {
		ok, _, chC, err := m.c.ExistsW(flag)
		_, _, chD, err2 := m.c.GetW(counter)
		watchErrs.expect(err == nil && err2 == nil && !ok, "member %d: watches: %s %s exists=%v",
			i+1, errName(err), errName(err2), ok)
		mw[i] = memberWatches{chC, chD}
	}
	_, err = members[len(members)-1].c.Create(flag, nil, 0, world)
	watchErrs.expect(err == nil, "create %s: %s", flag, errName(err))
	for i := range members {
		ev, got := waitEvent(mw[i].created)
		result(fmt.Sprintf("ens.member%d.flag_created", i+1), "%s", evDesc(ev, got))
		watchErrs.expect(got && ev.Type == zk.EventNodeCreated && ev.Path == flag,
			"member %d: exists watch: %s", i+1, evDesc(ev, got))
	}

	type writerLog struct {
		acked     map[string]string // name -> data
		cas       int
		retries   int
		errs      []string
		rywBroken []string
		progress  int32
	}
	logs := make([]*writerLog, writers)
	step("writers")
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		logs[w] = &writerLog{acked: map[string]string{}}
		wg.Add(1)
		go func(w int, s *session, lg *writerLog) {
			defer wg.Done()
			lastWritten := int32(-1)
			for i := 0; i < perWriter; i++ {
				data := fmt.Sprintf("w%d-%d", w, i)
				name, err := s.c.Create(seqDir+"/n-", []byte(data), zk.FlagSequence, world)
				if err != nil {
					lg.errs = append(lg.errs, fmt.Sprintf("create %d: %s", i, errName(err)))
					return
				}
				lg.acked[name] = data
				for attempt := 0; ; attempt++ {
					if attempt > 10000 {
						lg.errs = append(lg.errs, fmt.Sprintf("CAS %d: no success in 10000 tries", i))
						return
					}
					d, st, err := s.c.Get(counter)
					if err != nil {
						lg.errs = append(lg.errs, fmt.Sprintf("get counter: %s", errName(err)))
						return
					}
					if st.Version < lastWritten {
						lg.rywBroken = append(lg.rywBroken, fmt.Sprintf("read version %d after writing %d",
							st.Version, lastWritten))
					}
					n, convErr := strconv.Atoi(string(d))
					if convErr != nil || n != int(st.Version) {
						lg.errs = append(lg.errs, fmt.Sprintf("counter %q at version %d", d, st.Version))
						return
					}
					_, err = s.c.Set(counter, []byte(strconv.Itoa(n+1)), st.Version)
					if err == zk.ErrBadVersion {
						lg.retries++
						continue
					}
					if err != nil {
						lg.errs = append(lg.errs, fmt.Sprintf("set counter: %s", errName(err)))
						return
					}
					lg.cas++
					lastWritten = st.Version + 1
					break
				}
				atomic.StoreInt32(&lg.progress, int32(i+1))
			}
		}(w, members[w%len(members)], logs[w])
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(150 * time.Second):
		parts := make([]string, writers)
		for w := range logs {
			parts[w] = strconv.Itoa(int(atomic.LoadInt32(&logs[w].progress)))
		}
		fail("ens.writes_acked", "writers not done within 150 s; writes done per writer: %s",
			strings.Join(parts, ","))
		finish()
	}
	retries := 0
	for _, lg := range logs {
		retries += lg.retries
	}
	info("%d writers x %d (create + CAS) through %d members in %.1fs, %d CAS retries",
		writers, perWriter, len(members), time.Since(start).Seconds(), retries)

	acked := map[string]string{}
	cas := 0
	c = newCheck("ens.writes_acked")
	ryw := newCheck("ens.read_your_writes")
	for w, lg := range logs {
		c.expect(len(lg.errs) == 0, "writer %d: %s", w, strings.Join(lg.errs, ", "))
		ryw.expect(len(lg.rywBroken) == 0, "writer %d: %s", w, strings.Join(lg.rywBroken, ", "))
		for n, d := range lg.acked {
			if _, dup := acked[n]; dup {
				c.expect(false, "%s acknowledged twice", n)
			}
			acked[n] = d
		}
		cas += lg.cas
	}
	c.expect(len(acked) == total && cas == total, "%d creates and %d CAS acknowledged, want %d",
		len(acked), cas, total)
	c.done()
	for i := range members {
		ev, got := waitEvent(mw[i].changed)
		result(fmt.Sprintf("ens.member%d.counter_changed", i+1), "%s", evDesc(ev, got))
		watchErrs.expect(got && ev.Type == zk.EventNodeDataChanged && ev.Path == counter,
			"member %d: data watch: %s", i+1, evDesc(ev, got))
		evs := members[i].eventsFrom(0)
		result(fmt.Sprintf("ens.member%d.events", i+1), "%s", eventsDesc(evs))
		watchErrs.expect(len(evs) == 2, "member %d: events %s, want two", i+1, eventsDesc(evs))
	}
	watchErrs.done()
	ryw.done()
	result("ens.acked_creates", "%d", len(acked))
	result("ens.cas_successes", "%d", cas)

	c = newCheck("ens.sequence_gap_free")
	nums := make([]int, 0, len(acked))
	for n := range acked {
		k, ok := seqNumber(n)
		c.expect(ok, "%s has no sequence suffix", n)
		nums = append(nums, k)
	}
	sort.Ints(nums)
	for i, k := range nums {
		if k != i {
			c.expect(false, "sequence numbers are not 0..%d: position %d holds %d", len(nums)-1, i, k)
			break
		}
	}
	c.done()

	step("read back on every member")
	names := make([]string, 0, len(acked))
	for n := range acked {
		names = append(names, strings.TrimPrefix(n, seqDir+"/"))
	}
	sort.Strings(names)
	ackedList := sortedList(names)
	sees := newCheck("ens.every_member_sees_every_write")
	cnt := newCheck("ens.counter")
	for i, m := range members {
		tag := fmt.Sprintf("ens.member%d", i+1)
		_, err := m.c.Sync(seqDir)
		sees.expect(err == nil, "member %d: sync: %s", i+1, errName(err))
		kids, st, err := m.c.Children(seqDir)
		sees.expect(err == nil, "member %d: children: %s", i+1, errName(err))
		sort.Strings(kids)
		joined := strings.Join(kids, ",")
		first, last := "", ""
		if len(kids) > 0 {
			first, last = kids[0], kids[len(kids)-1]
		}
		result(tag+".children", "n=%d first=%s last=%s fnv=%s %s", len(kids), first, last,
			fnvHex([]byte(joined)), statDesc(st))
		sees.expect(sortedList(kids) == ackedList, "member %d holds %d children, %d acknowledged",
			i+1, len(kids), len(acked))
		wrong := 0
		for n, d := range acked {
			got, _, err := m.c.Get(n)
			if err != nil || string(got) != d {
				wrong++
				if wrong <= 3 {
					sees.expect(false, "member %d: %s reads %q (%s), want %q", i+1, n, got, errName(err), d)
				}
			}
		}
		sees.expect(wrong == 0, "member %d: %d nodes read wrong", i+1, wrong)
		_, err = m.c.Sync(counter)
		cnt.expect(err == nil, "member %d: sync: %s", i+1, errName(err))
		d, st, err := m.c.Get(counter)
		result(tag+".counter", "%s %s %s", errName(err), dataDesc(d), statDesc(st))
		cnt.expect(err == nil && string(d) == strconv.Itoa(cas) && int(st.Version) == cas,
			"member %d: counter %q version %d, %d CAS acknowledged", i+1, d, st.Version, cas)
	}
	sees.done()
	cnt.done()

	// ACLs whose ids go beyond ASCII, made through the first member (a
	// follower: it forwards the request, with its session's auth ids, to
	// the leader, whose txn carries the ACL to the others), read through
	// every member by a session of its own holding the same digest. Java
	// writes a character outside the BMP as two 3-byte surrogates, in
	// answers to clients and between servers, and reads those back as
	// replacement characters.
	step("ACL ids beyond ASCII on every member")
	acls := newCheck("ens.acl_ids")
	for _, x := range []struct{ name, user string }{
		{"bmp", "zo\u00eb\u2603"}, {"astral", "\U0001F600"},
	} {
		cred := []byte(x.user + ":pw")
		authNode, idNode := base+"/acl-auth-"+x.name, base+"/acl-id-"+x.name
		w, err := connect([]string{servers[0]}, "W-"+x.name)
		if err != nil {
			acls.expect(false, "session on member 1: %v", err)
			break
		}
		err = w.c.AddAuth("digest", cred)
		acls.expect(err == nil, "auth %s: %s", x.name, errName(err))
		// World-readable, so that every reader sees the ids (hashes hidden
		// from a reader without ADMIN); writing needs the digest.
		_, err = w.c.Create(authNode, []byte(x.name), 0,
			append(zk.AuthACL(zk.PermAll), zk.WorldACL(zk.PermRead)...))
		acls.expect(err == nil, "create %s: %s", authNode, errName(err))
		_, err = w.c.Create(idNode, []byte(x.name), 0, []zk.ACL{
			{Perms: zk.PermAll, Scheme: "digest", ID: x.user + ":abc"},
			{Perms: zk.PermRead, Scheme: "world", ID: "anyone"}})
		acls.expect(err == nil, "create %s: %s", idNode, errName(err))
		w.close()
		for i, srv := range servers {
			tag := fmt.Sprintf("ens.member%d.acl_%s", i+1, x.name)
			r, err := connect([]string{srv}, fmt.Sprintf("R%d-%s", i+1, x.name))
			if err != nil {
				acls.expect(false, "session on member %d: %v", i+1, err)
				continue
			}
			err = r.c.AddAuth("digest", cred)
			acls.expect(err == nil, "member %d: auth %s: %s", i+1, x.name, errName(err))
			_, err = r.c.Sync(base)
			acls.expect(err == nil, "member %d: sync: %s", i+1, errName(err))
			acl, _, err := r.c.GetACL(authNode)
			result(tag+".auth_acl", "%s %q", errName(err), aclDesc(acl))
			_, err = r.c.Set(authNode, []byte(fmt.Sprintf("set through member %d", i+1)), -1)
			result(tag+".auth_set", "%s", errName(err))
			if x.name == "bmp" {
				acls.expect(err == nil, "member %d: the creator's digest cannot write %s: %s", i+1,
					authNode, errName(err))
			}
			acl, _, err = r.c.GetACL(idNode)
			result(tag+".id_acl", "%s %q", errName(err), aclDesc(acl))
			r.close()
		}
	}
	acls.done()
	for _, m := range members {
		m.close()
	}
}

// ---------------------------------------------------------------------

func finish() {
	outMu.Lock()
	fmt.Printf("DONE passed=%d failed=%d\n", passed, failed)
	code := 0
	if failed > 0 {
		code = 1
	}
	outMu.Unlock()
	os.Exit(code)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gozk host:port[,host:port...] api|lock|ensemble")
		os.Exit(2)
	}
	servers := strings.Split(os.Args[1], ",")
	scenario := os.Args[2]
	bounds := map[string]time.Duration{"api": 150 * time.Second, "lock": 150 * time.Second,
		"ensemble": 200 * time.Second}
	bound, ok := bounds[scenario]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", scenario)
		os.Exit(2)
	}
	step("start")
	time.AfterFunc(bound, func() {
		fail(scenario+".deadline", "not done within %v, at step: %v", bound, curStep.Load())
		finish()
	})
	switch scenario {
	case "api":
		scenarioAPI(servers)
	case "lock":
		scenarioLock(servers)
	case "ensemble":
		scenarioEnsemble(servers)
	}
	finish()
}
