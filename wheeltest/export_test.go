package wheeltest

// SetMaxAdvancesAtOneInstant sets the bound on Advances at one instant to
// n, and returns a func that sets it back: a test of the panic need not
// make 65,536 Advances.
func SetMaxAdvancesAtOneInstant(n int) (restore func()) {
	old := maxAdvancesAtOneInstant
	maxAdvancesAtOneInstant = n
	return func() { maxAdvancesAtOneInstant = old }
}
