package peer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// refusalLog logs the connections the server turns away (and its accept
// errors): at most burst of them one by one per interval, the rest
// counted and said in one summary line when the interval ends. A flood
// of connections then costs a few lines per interval instead of one each
// (tens of thousands a second on loopback), while a handful of hostile
// or mistaken clients are each logged with their reason.
type refusalLog struct {
	logf     func(string, ...any)
	burst    int
	interval time.Duration

	mu       sync.Mutex
	logged   int            // lines logged one by one in this interval
	held     int            // refusals counted instead
	byReason map[string]int // held, per reason
	byClient map[string]int // held, per client (maxSummaryClients, then "others")
}

// maxSummaryClients bounds the clients a summary names (and the map that
// counts them): a flood from many addresses cannot grow it.
const maxSummaryClients = 8

func newRefusalLog(logf func(string, ...any), burst int, interval time.Duration) *refusalLog {
	return &refusalLog{logf: logf, burst: burst, interval: interval, byReason: map[string]int{}, byClient: map[string]int{}}
}

// refuse logs one refusal (format, args), or counts it under reason and
// client when this interval's burst is spent.
func (l *refusalLog) refuse(client, reason, format string, args ...any) {
	l.mu.Lock()
	if l.logged < l.burst {
		l.logged++
		l.mu.Unlock()
		l.logf(format, args...)
		return
	}
	l.held++
	l.byReason[reason]++
	if _, ok := l.byClient[client]; ok || len(l.byClient) < maxSummaryClients {
		l.byClient[client]++
	} else {
		l.byClient["others"]++
	}
	l.mu.Unlock()
}

// flush ends an interval: one line summing up what was held back, and a
// fresh burst.
func (l *refusalLog) flush() {
	l.mu.Lock()
	held, reasons, clients := l.held, l.byReason, l.byClient
	l.logged, l.held = 0, 0
	l.byReason, l.byClient = map[string]int{}, map[string]int{}
	l.mu.Unlock()
	if held > 0 {
		l.logf("%d more refusals in the last %v, not logged one by one (at most %d are per interval): %s; from %s",
			held, l.interval, l.burst, tally(reasons), tally(clients))
	}
}

// run flushes every interval until ctx ends, and once more then.
func (l *refusalLog) run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.flush()
		case <-ctx.Done():
			l.flush()
			return
		}
	}
}

// tally is counts as "a 12, b 3", the largest first.
func tally(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
