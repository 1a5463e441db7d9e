package a

import "example.com/m/doors/b"

var A = b.B
