package agent

import "testing"

func TestCPUModel(t *testing.T) {
	for _, tc := range []struct{ name, cpuinfo, want string }{
		{"x86", "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\n\nprocessor\t: 1\nmodel name\t: other\n", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz"},
		{"arm64", "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n", "0xd0c"},
		{"arm32", "processor\t: 0\nmodel name\t: \nHardware\t: BCM2835\n", "BCM2835"},
		{"none", "garbage\n", ""},
	} {
		if got := cpuModel([]byte(tc.cpuinfo)); got != tc.want {
			t.Errorf("cpuModel(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
