// Command etcd is etcd v3.7.3 (go.etcd.io/etcd/server/v3/etcdmain), built
// from the Go module proxy for the test bed (hack/testbed/kube.sh).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
