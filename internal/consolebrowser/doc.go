// Package consolebrowser holds the web console's end-to-end test in headless Chromium (browser_test.go): a
// real node, a real browser, one session for the whole walk. It has no code of its own. It lives outside
// ./http/... so that it runs in the suite's pass without the race detector (the codec work it starts is
// slow under -race; the console's own unit tests in http/console do run under it).
package consolebrowser
