package jsonmember

// RepeatedByDecoder is repeatedByDecoder, for the tests that hold
// Repeated to it.
var RepeatedByDecoder = repeatedByDecoder
