// Command kfake-broker runs franz-go's kfake, an in-memory Kafka cluster whose group coordinator follows Apache
// Kafka's (a join completes as soon as every known member has rejoined; a commit of the current generation is
// accepted while the group prepares a rebalance), on 127.0.0.1 for `make soak` (docs/kafka.md, "The kfake lane").
//
// It answers as a Kafka 3.6 broker (kversion.V3_6_0): Kafka 3.6 has no KIP-848 group API, so the ApiVersions answer
// carries no feature tags, which librdkafka before 2.2 cannot read.
//
// It prints one JSON line, {"bootstrap": "127.0.0.1:P1,..."}, once every broker listens, then reads commands on its
// standard input, one a line:
//
//	topic NAME PARTITIONS   creates a topic; prints "topic NAME ok" or "topic NAME failed: REASON"
//	drop SECONDS            a broker outage: every open connection is closed at once, and for SECONDS every new one
//	                        is accepted only to be closed (the ports stay bound; the cluster keeps its data and
//	                        its groups, which then time their members out as Kafka would)
//
// It exits when its standard input closes (the process that started it is gone), on SIGTERM or SIGINT, and after
// -max-seconds at the latest.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// outage tracks every accepted connection and until when new ones are refused.
type outage struct {
	mu        sync.Mutex
	downUntil time.Time
	conns     map[net.Conn]struct{}
}

func (o *outage) drop(d time.Duration) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if until := time.Now().Add(d); until.After(o.downUntil) {
		o.downUntil = until
	}
	n := len(o.conns)
	for c := range o.conns {
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // a reset, as when a broker's host goes away
		}
		_ = c.Close()
	}
	clear(o.conns)
	return n
}

// admit keeps c unless the cluster is down, in which case it closes c and says so.
func (o *outage) admit(c net.Conn) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if time.Now().Before(o.downUntil) {
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = c.Close()
		return false
	}
	o.conns[c] = struct{}{}
	return true
}

func (o *outage) forget(c net.Conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.conns, c)
}

type trackedListener struct {
	net.Listener
	outage *outage
}

func (l trackedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.outage.admit(c) {
			return trackedConn{Conn: c, outage: l.outage}, nil
		}
	}
}

type trackedConn struct {
	net.Conn
	outage *outage
}

func (c trackedConn) Close() error {
	c.outage.forget(c.Conn)
	return c.Conn.Close()
}

func createTopic(bootstrap []string, name string, partitions int32) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic = name
	topic.NumPartitions = partitions
	topic.ReplicationFactor = 1
	req.Topics = append(req.Topics, topic)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	brokers := flag.Int("brokers", 3, "number of brokers")
	maxSeconds := flag.Int("max-seconds", 1200, "exit after this many seconds at the latest")
	flag.Parse()

	o := &outage{conns: map[net.Conn]struct{}{}}
	listen := func(network, address string) (net.Listener, error) {
		l, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		return trackedListener{Listener: l, outage: o}, nil
	}
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(*brokers),
		kfake.ListenFn(listen),
		kfake.MaxVersions(kversion.V3_6_0()),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfake-broker: %v\n", err)
		os.Exit(1)
	}
	defer cluster.Close()
	bootstrap := cluster.ListenAddrs()
	line, _ := json.Marshal(map[string]string{"bootstrap": strings.Join(bootstrap, ",")})
	fmt.Println(string(line))

	done := make(chan struct{})
	go func() {
		defer close(done)
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
			words := strings.Fields(scanner.Text())
			switch {
			case len(words) == 3 && words[0] == "topic":
				n, err := strconv.ParseInt(words[2], 10, 32)
				if err == nil && n <= 0 {
					err = fmt.Errorf("partitions must be positive")
				}
				if err == nil {
					err = createTopic(bootstrap, words[1], int32(n))
				}
				if err != nil {
					fmt.Printf("topic %s failed: %v\n", words[1], err)
				} else {
					fmt.Printf("topic %s ok\n", words[1])
				}
			case len(words) == 2 && words[0] == "drop":
				seconds, err := strconv.ParseFloat(words[1], 64)
				if err != nil || seconds < 0 || seconds > 3600 {
					fmt.Fprintf(os.Stderr, "kfake-broker: ignoring %q (SECONDS is 0 to 3600)\n", scanner.Text())
					continue
				}
				n := o.drop(time.Duration(seconds * float64(time.Second)))
				fmt.Fprintf(os.Stderr, "kfake-broker: dropped %d connections; refusing new ones for %g s\n", n, seconds)
			case len(words) > 0:
				fmt.Fprintf(os.Stderr, "kfake-broker: ignoring %q (expected `topic NAME PARTITIONS` or `drop SECONDS`)\n",
					scanner.Text())
			}
		}
	}()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-signals:
	case <-time.After(time.Duration(*maxSeconds) * time.Second):
		fmt.Fprintf(os.Stderr, "kfake-broker: stopping after %d s (-max-seconds)\n", *maxSeconds)
	}
}
