package testenv

import "sync"

// OnReplicas runs f n times at once, the i-th on replicas[i%len(replicas)]
// (handles on one database, as the portal's replicas hold them), and
// returns when all have: the harness of the tests that race replicas
// for a decision the store must take once.
func OnReplicas[R any](n int, replicas []R, f func(i int, r R)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i, replicas[i%len(replicas)])
		}()
	}
	wg.Wait()
}
