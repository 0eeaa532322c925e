module kcg/fanout

go 1.19
