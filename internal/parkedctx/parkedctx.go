// Package parkedctx is a context for tests of code that waits: it tells the test when the code under test
// first asks for its Done channel, i.e. when a request has reached the point where it blocks (in a read the
// test holds, or waiting for another request's answer), so the test knows every request is waiting without
// sleeping. It owns nothing else and must not be used outside tests' set-up.
package parkedctx

import (
	"context"
	"sync"
)

// Context is a context whose first call of Done closes Parked.
type Context struct {
	context.Context
	once   sync.Once
	parked chan struct{}
}

// New returns a Context around parent.
func New(parent context.Context) *Context {
	return &Context{Context: parent, parked: make(chan struct{})}
}

// Done is the parent's Done; its first call closes Parked.
func (c *Context) Done() <-chan struct{} {
	c.once.Do(func() { close(c.parked) })
	return c.Context.Done()
}

// Parked closes once something has asked for Done.
func (c *Context) Parked() <-chan struct{} { return c.parked }
