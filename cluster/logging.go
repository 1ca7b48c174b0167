package cluster

import (
	"bytes"
	"log"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

// LoggerFactory returns a protoactor logger factory that writes through zl.
// protoactor logs with log/slog; zerolog's slog handler keeps one log stream
// (and one level setting) for the whole process.
func LoggerFactory(zl zerolog.Logger) func(*actor.ActorSystem) *slog.Logger {
	return func(sys *actor.ActorSystem) *slog.Logger {
		return slog.New(zerolog.NewSlogHandler(zl.With().Str("actor_system", sys.ID).Logger()))
	}
}

// memberlistLogger adapts memberlist's standard-library logger, whose lines
// start with "[DEBUG]", "[INFO]", "[WARN]" or "[ERR]", to zerolog levels.
func memberlistLogger(zl zerolog.Logger) *log.Logger {
	return log.New(levelWriter{zl: zl}, "", 0)
}

type levelWriter struct{ zl zerolog.Logger }

func (w levelWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := zerolog.InfoLevel
	for _, l := range []struct {
		prefix string
		level  zerolog.Level
	}{
		{"[DEBUG]", zerolog.DebugLevel},
		{"[INFO]", zerolog.InfoLevel},
		{"[WARN]", zerolog.WarnLevel},
		{"[ERR]", zerolog.ErrorLevel},
		{"[ERROR]", zerolog.ErrorLevel},
	} {
		if rest, ok := bytes.CutPrefix(line, []byte(l.prefix)); ok {
			level = l.level
			line = bytes.TrimSpace(rest)
			break
		}
	}
	w.zl.WithLevel(level).Str("component", "memberlist").Msg(string(line))
	return len(p), nil
}
