// Command receiver opens many concurrent change streams and measures delivery.
//
// Each change the benchmark driver makes carries its send time (unix nanoseconds)
// in the annotation "bench/sent"; the receiver records, per stream, every
// resourceVersion it gets and the latency from send to receipt.
// It prints one JSON line: connected streams, deliveries, latency percentiles,
// and how many expected deliveries had not arrived by its deadline (late or never).
//
// It shares the machine with what it measures, so it does as little as it can per
// delivery: the two fields it needs are found in the line's bytes (the first
// "resourceVersion" is the object's own: metadata comes first in the API server's
// JSON, and in the gateway's, which sends the API server's bytes) instead of decoding
// the whole object. A delivery is told apart by its resourceVersion alone (the store's
// revision: each change has its own), read as a number, so that receiving allocates
// nothing per delivery and the receiver's collector stays out of the way.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

var (
	versionKey  = []byte(`"resourceVersion":"`)
	sentKey     = []byte(`"bench/sent":"`)
	modifiedSSE = []byte("event: MODIFIED")
	modifiedW   = []byte(`{"type":"MODIFIED"`)
)

// field returns the string value after the first occurrence of key (nil if none).
func field(line, key []byte) []byte {
	i := bytes.Index(line, key)
	if i < 0 {
		return nil
	}
	rest := line[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil
	}
	return rest[:j]
}

// digits reads a decimal number from its bytes (no string made, nothing allocated).
func digits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return int64(v), v <= math.MaxInt64
}

func main() {
	url := flag.String("url", "", "stream URL")
	mode := flag.String("mode", "sse", "sse or watch")
	n := flag.Int("n", 100, "concurrent streams")
	token := flag.String("token", "", "bearer token")
	ca := flag.String("ca", "", "CA file for https")
	duration := flag.Duration("duration", 70*time.Second, "how long to listen")
	expect := flag.Int("expect", 0, "changes each stream must receive")
	procs := flag.Int("procs", 1, "threads running Go code (GOMAXPROCS)")
	flag.Parse()
	debug.SetGCPercent(400) // its heap is the streams' buffers: collect it seldom
	// One by default. On a machine of two cores shared with the server it measures, a
	// second would spend its time spinning in the scheduler for goroutines to wake, taken
	// from that server: at 5,000 streams x 10/s, one took 84 % of a core where two took 93 %,
	// and deliveries were read sooner (p50 144 against 352 ms).
	runtime.GOMAXPROCS(*procs)

	transport := &http.Transport{MaxIdleConnsPerHost: *n, MaxConnsPerHost: 0, DisableCompression: true}
	if *ca != "" {
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(*ca)
		if err != nil {
			panic(err)
		}
		pool.AppendCertsFromPEM(pem)
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, InsecureSkipVerify: true}
		transport.ForceAttemptHTTP2 = false
		transport.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	client := &http.Client{Transport: transport}

	var connected int64
	var wg sync.WaitGroup
	latencies := make([][]float64, *n)
	seen := make([]map[int64]struct{}, *n)
	deadline := time.Now().Add(*duration)
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			seen[i] = make(map[int64]struct{}, *expect)
			latencies[i] = make([]float64, 0, *expect)
			req, _ := http.NewRequest("GET", *url, nil)
			if *mode == "sse" {
				req.Header.Set("Accept", "text/event-stream")
			}
			if *token != "" {
				req.Header.Set("Authorization", "Bearer "+*token)
			}
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 200 {
				fmt.Fprintln(os.Stderr, "connect failed:", err)
				return
			}
			defer resp.Body.Close()
			atomic.AddInt64(&connected, 1)
			go func() { time.Sleep(time.Until(deadline)); resp.Body.Close() }()
			scanner := bufio.NewScanner(resp.Body)
			scanner.Buffer(make([]byte, 1<<20), 16<<20)
			modified := false
			for scanner.Scan() {
				now := time.Now().UnixNano()
				line := scanner.Bytes()
				if *mode == "sse" {
					if bytes.HasPrefix(line, []byte("event: ")) {
						modified = bytes.Equal(line, modifiedSSE)
						continue
					}
					// Only changes count: the initial state's objects may carry old send times.
					if !modified || !bytes.HasPrefix(line, []byte("data: ")) {
						continue
					}
				} else if !bytes.HasPrefix(line, modifiedW) {
					continue
				}
				sent := field(line, sentKey)
				if sent == nil {
					continue
				}
				ns, ok := digits(sent)
				if !ok {
					continue
				}
				version, ok := digits(field(line, versionKey))
				if !ok {
					continue
				}
				if _, again := seen[i][version]; again {
					continue
				}
				seen[i][version] = struct{}{}
				latencies[i] = append(latencies[i], float64(now-ns)/1e6)
			}
		}(i)
	}
	// Report when every stream is connected, so the driver knows when to start.
	go func() {
		for atomic.LoadInt64(&connected) < int64(*n) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Println(`{"ready": true}`)
	}()
	wg.Wait()

	var all []float64
	lost := 0
	for i := 0; i < *n; i++ {
		all = append(all, latencies[i]...)
		if *expect > len(seen[i]) {
			lost += *expect - len(seen[i])
		}
	}
	sort.Float64s(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return -1
		}
		return all[int(p*float64(len(all)-1))]
	}
	out, _ := json.Marshal(map[string]interface{}{
		"connected": connected, "deliveries": len(all), "lost": lost,
		"p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99), "max_ms": pct(1.0),
	})
	fmt.Println(string(out))
}
