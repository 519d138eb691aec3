package cluster

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestClusterFlags checks which --apiservers and --kubeconfig go together:
// --apiservers from 1 to MaxAPIServers, not beside --kubeconfig, though
// beside KUBECONFIG (which it overrides).
func TestClusterFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args       []string
		env        string
		wantErr    string // "" for none
		apiservers int
	}{
		{args: nil},
		{args: []string{"--kubeconfig=file"}},
		{args: []string{"--apiservers=1"}, apiservers: 1},
		{args: []string{"--apiservers=5"}, apiservers: 5},
		{args: []string{"--apiservers=2"}, env: "from-env", apiservers: 2},
		{args: []string{"--apiservers=0"}, wantErr: "--apiservers 0: want 1 to 5 kube-apiservers"},
		{args: []string{"--apiservers=6"}, wantErr: "--apiservers 6: want 1 to 5 kube-apiservers"},
		{args: []string{"--apiservers=-3"}, wantErr: "--apiservers -3: want 1 to 5 kube-apiservers"},
		{args: []string{"--apiservers=2", "--kubeconfig=file"}, wantErr: "cannot be used with --kubeconfig"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := AddClusterFlags(fs, tc.env)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := f.Check()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.wantErr)
		case err == nil && f.APIServers() != tc.apiservers:
			t.Errorf("%v: APIServers %d, want %d", tc.args, f.APIServers(), tc.apiservers)
		}
	}
}
