package llm

import (
	"bufio"
	"bytes"
	"io"
)

// maxSSELine bounds one line of a provider's event stream (a data line carries one
// JSON event; the largest seen are search results of a few hundred KB).
const maxSSELine = 8 << 20

// ReadSSE reads a server-sent event stream and calls fn with each event's name ("" when
// it has none) and data (the data lines joined by "\n"), in order. Comments and empty
// events are skipped. It returns fn's first error, the reader's error, or nil at the
// end of the stream. The data slice is valid only during the call.
func ReadSSE(r io.Reader, fn func(event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	var name string
	var data []byte
	have := false
	dispatch := func() error {
		if !have {
			name = ""
			return nil
		}
		err := fn(name, data)
		name, data, have = "", data[:0], false
		return err
	}
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if err := dispatch(); err != nil {
				return err
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if have {
				data = append(data, '\n')
			}
			data = append(data, value...)
			have = true
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return dispatch()
}
