package snapshot

// SetAfterOutputOpened sets the hook WriteDir runs once it holds its output
// directory, and returns a function that puts the old one back.
func SetAfterOutputOpened(f func(dir string)) (restore func()) {
	old := afterOutputOpened
	afterOutputOpened = f
	return func() { afterOutputOpened = old }
}
