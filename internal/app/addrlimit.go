package app

import (
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// perAddress closes at once a connection from an address that already
// holds max open ones, so one client — a slowloris holding thousands of
// slow sockets — cannot take every slot of server.max_connections from
// everyone else, the health probes included. Behind a load balancer every
// connection comes from its few addresses: raise the cap there, or turn it
// off (server.max_connections_per_address: -1).
type perAddress struct {
	net.Listener
	max     int
	refused prometheus.Counter

	mu   sync.Mutex
	open map[string]int
}

func limitPerAddress(ln net.Listener, max int, refused prometheus.Counter) net.Listener {
	return &perAddress{Listener: ln, max: max, refused: refused, open: map[string]int{}}
}

// Accept returns the next connection from an address under its cap.
func (l *perAddress) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		l.mu.Lock()
		if l.open[host] >= l.max {
			l.mu.Unlock()
			c.Close()
			l.refused.Inc()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &addrConn{Conn: c, l: l, host: host}, nil
	}
}

func (l *perAddress) release(host string) {
	l.mu.Lock()
	if l.open[host]--; l.open[host] <= 0 {
		delete(l.open, host)
	}
	l.mu.Unlock()
}

// addrConn gives its address's slot back when it closes.
type addrConn struct {
	net.Conn
	l    *perAddress
	host string
	once sync.Once
}

func (c *addrConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}
