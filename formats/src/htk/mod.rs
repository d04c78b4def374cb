//! HTK's file formats: MMFs (text and binary), parameter files, MLFs and
//! script files, read and written as HTK 3.4.1 does.
