package store

var X = 1
