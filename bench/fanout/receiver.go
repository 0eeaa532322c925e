// Command receiver opens many concurrent change streams and measures delivery.
//
// Each change the benchmark driver makes carries its send time (unix nanoseconds)
// in the annotation "bench/sent"; the receiver records, per stream, every
// (name, resourceVersion) it gets and the latency from send to receipt.
// It prints one JSON line: connected streams, deliveries, latency percentiles,
// and how many expected deliveries never arrived.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type object struct {
	Metadata struct {
		Name            string            `json:"name"`
		ResourceVersion string            `json:"resourceVersion"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
}

type watchEvent struct {
	Type   string `json:"type"`
	Object object `json:"object"`
}

func main() {
	url := flag.String("url", "", "stream URL")
	mode := flag.String("mode", "sse", "sse or watch")
	n := flag.Int("n", 100, "concurrent streams")
	token := flag.String("token", "", "bearer token")
	ca := flag.String("ca", "", "CA file for https")
	duration := flag.Duration("duration", 70*time.Second, "how long to listen")
	expect := flag.Int("expect", 0, "changes each stream must receive")
	flag.Parse()

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
	seen := make([]map[string]bool, *n)
	deadline := time.Now().Add(*duration)
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			seen[i] = map[string]bool{}
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
			eventType := ""
			for scanner.Scan() {
				line := scanner.Bytes()
				var obj object
				if *mode == "sse" {
					if strings.HasPrefix(string(line), "event: ") {
						eventType = string(line[7:])
						continue
					}
					// Only changes count: the initial state's objects may carry old send times.
					if !strings.HasPrefix(string(line), "data: ") || eventType != "MODIFIED" {
						continue
					}
					if json.Unmarshal(line[6:], &obj) != nil {
						continue
					}
				} else {
					var ev watchEvent
					if json.Unmarshal(line, &ev) != nil || ev.Type != "MODIFIED" {
						continue
					}
					obj = ev.Object
				}
				sent, ok := obj.Metadata.Annotations["bench/sent"]
				if !ok {
					continue
				}
				ns, err := strconv.ParseInt(sent, 10, 64)
				if err != nil {
					continue
				}
				key := obj.Metadata.Name + "@" + obj.Metadata.ResourceVersion
				if seen[i][key] {
					continue
				}
				seen[i][key] = true
				latencies[i] = append(latencies[i], float64(time.Now().UnixNano()-ns)/1e6)
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
