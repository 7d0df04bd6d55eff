package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// batcher sends the settlements that wait at the same time in one
// pipeline (group commit): while one batch is out, settlements that come
// queue, and the next batch takes them all. No settlement waits for a
// timer — alone, it goes at once, as before — and under load one round
// trip, one read and one write on Redis's side carry many. Each call keeps
// its own reply: a batch is only a way to send, every settlement is still
// its own atomic script.
type batcher struct {
	s *Store

	mu    sync.Mutex
	queue []*queued
	busy  bool
}

type queued struct {
	keys []string
	args []any
	raw  []int64
	err  error
	done chan struct{}
}

// pipeliner is what a batch needs of the client (every go-redis client
// has it; a plain Scripter sends calls one by one).
type pipeliner interface{ Pipeline() redis.Pipeliner }

// run runs settle.lua for partition with keys and args, in the next batch,
// marked (marks.go): should Redis lose it, it is run again.
func (b *batcher) run(ctx context.Context, partition string, keys []string, args []any) ([]int64, error) {
	return b.s.marks.run(ctx, partition, settleScript, keys, args, b.enqueue, func([]int64) []any { return args })
}

// enqueue sends one framed call in the next batch. A caller that has given
// up before is not queued; once queued, the call waits for its batch (each
// has SettleTimeout), whose reply tells what happened.
func (b *batcher) enqueue(ctx context.Context, keys []string, args []any) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q := &queued{keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, q)
	if !b.busy {
		b.busy = true
		go b.loop()
	}
	b.mu.Unlock()
	<-q.done // a batch ends within SettleTimeout
	return q.raw, q.err
}

// loop sends batches until none waits.
func (b *batcher) loop() {
	for {
		b.mu.Lock()
		batch := b.queue
		b.queue = nil
		if len(batch) == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.send(batch)
		for _, q := range batch {
			close(q.done)
		}
	}
}

// maxBatch bounds one pipeline.
const maxBatch = 256

func (b *batcher) send(batch []*queued) {
	s := b.s
	for len(batch) > 0 {
		n := min(len(batch), maxBatch)
		part := batch[:n]
		batch = batch[n:]
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.SettleTimeout)
		p, ok := s.rdb.(pipeliner)
		if n == 1 || !ok {
			for _, q := range part {
				q.err = s.do(func() (err error) {
					q.raw, err = settleScript.Run(ctx, s.rdb, q.keys, q.args...).Int64Slice()
					return err
				})
			}
			cancel()
			continue
		}
		err := s.do(func() error { return b.pipeline(ctx, p, part) })
		cancel()
		if err != nil {
			for _, q := range part {
				if q.err == nil && q.raw == nil {
					q.err = err
				}
			}
		}
	}
}

// pipeline sends part by EVALSHA, and again by EVAL what found the script
// missing (a restarted or flushed Redis). It returns an error only when
// Redis did not answer; a script's own error stays with its call.
func (b *batcher) pipeline(ctx context.Context, p pipeliner, part []*queued) error {
	cmds := make([]*redis.Cmd, len(part))
	pipe := p.Pipeline()
	for i, q := range part {
		cmds[i] = settleScript.EvalSha(ctx, pipe, q.keys, q.args...)
	}
	_, _ = pipe.Exec(ctx)
	var missing []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		pipe = p.Pipeline()
		for _, i := range missing {
			cmds[i] = settleScript.Eval(ctx, pipe, part[i].keys, part[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	var unanswered error
	for i, c := range cmds {
		part[i].raw, part[i].err = c.Int64Slice()
		if !isAnswer(part[i].err) && unanswered == nil {
			unanswered = part[i].err
		}
	}
	return unanswered
}
