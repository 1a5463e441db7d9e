package long

// tooLong is one line over.

func tooLong() int {
	x := 0
	x := 0
	x := 0
	x := 0
	x := 0
	x := 0
	return x
}

// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
// padding to make the file one line over its bound
