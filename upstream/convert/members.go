package convert

import "github.com/tidwall/gjson"

// members are a JSON object's members, read in one pass. Result.Get scans
// the object from its start at every call, and a translated request read
// some twenty fields of the request and a dozen of the answer that way: a
// fifth of its instructions.
type members struct {
	r   gjson.Result
	obj bool
	kv  []member
}

type member struct {
	key string
	val gjson.Result
}

func membersOf(r gjson.Result) members {
	m := members{r: r, obj: r.IsObject()}
	if m.obj {
		r.ForEach(func(k, v gjson.Result) bool {
			m.kv = append(m.kv, member{k.String(), v})
			return true
		})
	}
	return m
}

// Get is r.Get(path): a plain key (letters, digits, _) is the first member
// of that name, as gjson finds it; any other path, which may be in gjson's
// syntax, or a value that is not an object, is left to gjson.
func (m members) Get(path string) gjson.Result {
	if !m.obj || !plainKey(path) {
		return m.r.Get(path)
	}
	for i := range m.kv {
		if m.kv[i].key == path {
			return m.kv[i].val
		}
	}
	return gjson.Result{}
}

func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return k != ""
}
