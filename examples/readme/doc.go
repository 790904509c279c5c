// Package readme holds the code snippets of the repository's README.md as
// tests, so that they compile, run and pass. Its test fails when a snippet in
// README.md no longer matches the code here (or, for the examples it shows,
// ExampleHierarchy_AfterFunc and ExampleTimer_Reset, the root
// example_test.go).
package readme
