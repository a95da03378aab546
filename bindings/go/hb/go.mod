module hb.dev/hb

go 1.19
