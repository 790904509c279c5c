// Package readme holds the code snippets of the repository's README.md as
// tests, so that they compile, run and pass. Its test fails when a snippet in
// README.md no longer matches the code here (or, for the examples it shows,
// ExampleHierarchy_AfterFunc and parts of ExampleTimer_Reset and
// ExampleHierarchy_Every, the root example_test.go), and when a snippet of
// README.md, of the package's doc comments or of its examples arms a timer
// whose callback uses the variable the arming is assigned to (a data race
// with a running driver). It holds the layouts of docs/tuning.md's code
// blocks the same way: its test fails when a block there is not in
// tuning_test.go, and runs each layout with the driver.
package readme
