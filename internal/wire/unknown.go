package wire

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// UnknownFields lists the fields of m, at any depth, that this build's
// schema does not have: what a newer peer set and this build decoded as
// unknown (protobuf keeps them aside; the conversions here never read
// them). Each entry is the field's path from m in the schema's names, then
// its number: "plan.open_loop.3". Nil when there is none. Sorted.
func UnknownFields(m proto.Message) []string {
	var out []string
	unknownIn(m.ProtoReflect(), "", &out)
	sort.Strings(out)
	return out
}

func unknownIn(m protoreflect.Message, path string, out *[]string) {
	for b := m.GetUnknown(); len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			*out = append(*out, join(path, "(malformed)"))
			break
		}
		*out = append(*out, join(path, fmt.Sprint(int32(num))))
		b = b[n:]
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := join(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					unknownIn(mv.Message(), fmt.Sprintf("%s[%v]", name, k.Interface()), out)
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				l := v.List()
				for i := range l.Len() {
					unknownIn(l.Get(i).Message(), fmt.Sprintf("%s[%d]", name, i), out)
				}
			}
		case fd.Message() != nil:
			unknownIn(v.Message(), name, out)
		}
		return true
	})
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
