package demo

// Quiet is a logger that drops everything. It has the methods of gnet's
// logging.Logger, so the gnet module's demo and tests pass it to
// gnet.WithLogger (gnet logs every launch) without this module's
// depending on gnet.
type Quiet struct{}

func (Quiet) Debugf(string, ...any) {}
func (Quiet) Infof(string, ...any)  {}
func (Quiet) Warnf(string, ...any)  {}
func (Quiet) Errorf(string, ...any) {}
func (Quiet) Fatalf(string, ...any) {}
