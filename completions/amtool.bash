_amtool() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="amtool"
                ;;
            amtool,acc-stats)
                cmd="amtool__subcmd__acc__subcmd__stats"
                ;;
            amtool,align)
                cmd="amtool__subcmd__align"
                ;;
            amtool,align-equal)
                cmd="amtool__subcmd__align__subcmd__equal"
                ;;
            amtool,bench)
                cmd="amtool__subcmd__bench"
                ;;
            amtool,boost-silence)
                cmd="amtool__subcmd__boost__subcmd__silence"
                ;;
            amtool,completions)
                cmd="amtool__subcmd__completions"
                ;;
            amtool,copy)
                cmd="amtool__subcmd__copy"
                ;;
            amtool,copy-to-htk)
                cmd="amtool__subcmd__copy__subcmd__to__subcmd__htk"
                ;;
            amtool,est)
                cmd="amtool__subcmd__est"
                ;;
            amtool,global-get-post)
                cmd="amtool__subcmd__global__subcmd__get__subcmd__post"
                ;;
            amtool,gselect)
                cmd="amtool__subcmd__gselect"
                ;;
            amtool,gselect-to-post)
                cmd="amtool__subcmd__gselect__subcmd__to__subcmd__post"
                ;;
            amtool,help)
                cmd="amtool__subcmd__help"
                ;;
            amtool,herest)
                cmd="amtool__subcmd__herest"
                ;;
            amtool,man)
                cmd="amtool__subcmd__man"
                ;;
            amtool,map-adapt)
                cmd="amtool__subcmd__map__subcmd__adapt"
                ;;
            amtool,rescore-lattice)
                cmd="amtool__subcmd__rescore__subcmd__lattice"
                ;;
            amtool,score)
                cmd="amtool__subcmd__score"
                ;;
            amtool,score-htk)
                cmd="amtool__subcmd__score__subcmd__htk"
                ;;
            amtool,shims)
                cmd="amtool__subcmd__shims"
                ;;
            amtool,sum-accs)
                cmd="amtool__subcmd__sum__subcmd__accs"
                ;;
            amtool,ubm-map)
                cmd="amtool__subcmd__ubm__subcmd__map"
                ;;
            amtool__subcmd__help,acc-stats)
                cmd="amtool__subcmd__help__subcmd__acc__subcmd__stats"
                ;;
            amtool__subcmd__help,align)
                cmd="amtool__subcmd__help__subcmd__align"
                ;;
            amtool__subcmd__help,align-equal)
                cmd="amtool__subcmd__help__subcmd__align__subcmd__equal"
                ;;
            amtool__subcmd__help,bench)
                cmd="amtool__subcmd__help__subcmd__bench"
                ;;
            amtool__subcmd__help,boost-silence)
                cmd="amtool__subcmd__help__subcmd__boost__subcmd__silence"
                ;;
            amtool__subcmd__help,completions)
                cmd="amtool__subcmd__help__subcmd__completions"
                ;;
            amtool__subcmd__help,copy)
                cmd="amtool__subcmd__help__subcmd__copy"
                ;;
            amtool__subcmd__help,copy-to-htk)
                cmd="amtool__subcmd__help__subcmd__copy__subcmd__to__subcmd__htk"
                ;;
            amtool__subcmd__help,est)
                cmd="amtool__subcmd__help__subcmd__est"
                ;;
            amtool__subcmd__help,global-get-post)
                cmd="amtool__subcmd__help__subcmd__global__subcmd__get__subcmd__post"
                ;;
            amtool__subcmd__help,gselect)
                cmd="amtool__subcmd__help__subcmd__gselect"
                ;;
            amtool__subcmd__help,gselect-to-post)
                cmd="amtool__subcmd__help__subcmd__gselect__subcmd__to__subcmd__post"
                ;;
            amtool__subcmd__help,help)
                cmd="amtool__subcmd__help__subcmd__help"
                ;;
            amtool__subcmd__help,herest)
                cmd="amtool__subcmd__help__subcmd__herest"
                ;;
            amtool__subcmd__help,man)
                cmd="amtool__subcmd__help__subcmd__man"
                ;;
            amtool__subcmd__help,map-adapt)
                cmd="amtool__subcmd__help__subcmd__map__subcmd__adapt"
                ;;
            amtool__subcmd__help,rescore-lattice)
                cmd="amtool__subcmd__help__subcmd__rescore__subcmd__lattice"
                ;;
            amtool__subcmd__help,score)
                cmd="amtool__subcmd__help__subcmd__score"
                ;;
            amtool__subcmd__help,score-htk)
                cmd="amtool__subcmd__help__subcmd__score__subcmd__htk"
                ;;
            amtool__subcmd__help,shims)
                cmd="amtool__subcmd__help__subcmd__shims"
                ;;
            amtool__subcmd__help,sum-accs)
                cmd="amtool__subcmd__help__subcmd__sum__subcmd__accs"
                ;;
            amtool__subcmd__help,ubm-map)
                cmd="amtool__subcmd__help__subcmd__ubm__subcmd__map"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        amtool)
            opts="-h -V --help --version bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__acc__subcmd__stats)
            opts="-h --verbose --print-args --config --binary --use-gpu --threads --gpus --update-flags --gselect --weights --kaldi-tool --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --binary)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --use-gpu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --update-flags)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gselect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --weights)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kaldi-tool)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__align)
            opts="-h --verbose --print-args --config --use-gpu --threads --acoustic-scale --beam --careful --retry-beam --self-loop-scale --transition-scale --write-per-frame-acoustic-loglikes --max-active --min-active --beam-delta --hash-ratio --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --use-gpu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --acoustic-scale)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --beam)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --careful)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retry-beam)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --self-loop-scale)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transition-scale)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --write-per-frame-acoustic-loglikes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-active)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-active)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --beam-delta)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hash-ratio)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__align__subcmd__equal)
            opts="-h --verbose --print-args --config --binary --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --binary)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__bench)
            opts="-h --engine --gpus --case --frames --gaussians --states --gaussians-per-state --dim --threads --reps --path --jobs --check-frames --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --engine)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --case)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --frames)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gaussians)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --states)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gaussians-per-state)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --dim)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --path)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --jobs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --check-frames)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__boost__subcmd__silence)
            opts="-h --verbose --print-args --config --binary --boost --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --binary)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --boost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__completions)
            opts="-h --help bash elvish fish powershell zsh"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__copy)
            opts="-h --verbose --print-args --config --binary --compress --compression-method --htk-in --write-compact --include --exclude --ignore-missing --write-num-frames --sphinx-in --scale --apply-log --apply-exp --apply-power --apply-softmax-per-row --change-dim --copy-tm --copy-am --kaldi-tool --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --binary)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compress)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --compression-method)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --htk-in)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --write-compact)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --include)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --exclude)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ignore-missing)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --write-num-frames)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sphinx-in)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --scale)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --apply-log)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --apply-exp)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --apply-power)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --apply-softmax-per-row)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --change-dim)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --copy-tm)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --copy-am)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kaldi-tool)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__copy__subcmd__to__subcmd__htk)
            opts="-h --verbose --print-args --config --output-dir --output-ext --sample-period --sample-kind --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output-ext)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sample-period)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sample-kind)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__est)
            opts="-h --verbose --print-args --config --binary --mix-up --mix-down --power --min-count --perturb-factor --update-flags --write-occs --transition-floor --transition-min-count --share-for-pdfs --min-gaussian-weight --min-gaussian-occupancy --min-variance --variance-floor --max-condition --remove-low-count-gaussians --kaldi-tool --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --binary)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mix-up)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mix-down)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --power)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-count)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --perturb-factor)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --update-flags)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --write-occs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transition-floor)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --transition-min-count)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --share-for-pdfs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-gaussian-weight)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-gaussian-occupancy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-variance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --variance-floor)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-condition)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --remove-low-count-gaussians)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kaldi-tool)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__global__subcmd__get__subcmd__post)
            opts="-h --verbose --print-args --config --use-gpu --threads --n --min-post --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --use-gpu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-post)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__gselect)
            opts="-h --verbose --print-args --config --use-gpu --threads --gpus --n --gselect --write-likes --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --use-gpu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gselect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --write-likes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__gselect__subcmd__to__subcmd__post)
            opts="-h --verbose --print-args --config --min-post --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-post)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help)
            opts="bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__acc__subcmd__stats)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__align)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__align__subcmd__equal)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__bench)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__boost__subcmd__silence)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__completions)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__copy)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__copy__subcmd__to__subcmd__htk)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__est)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__global__subcmd__get__subcmd__post)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__gselect)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__gselect__subcmd__to__subcmd__post)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__herest)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__man)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__map__subcmd__adapt)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__rescore__subcmd__lattice)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__score)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__score__subcmd__htk)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__shims)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__sum__subcmd__accs)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__help__subcmd__ubm__subcmd__map)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__herest)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__man)
            opts="-h --completions --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --completions)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__map__subcmd__adapt)
            opts="-h --verbose --print-args --config --use-gpu --threads --spk2utt --binary --update-flags --mean-tau --variance-tau --weight-tau --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --use-gpu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spk2utt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --binary)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --update-flags)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mean-tau)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --variance-tau)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --weight-tau)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__rescore__subcmd__lattice)
            opts="-h --verbose --print-args --config --old-acoustic-scale --use-gpu --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --old-acoustic-scale)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --use-gpu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__score)
            opts="-h --verbose --print-args --config --use-gpu --threads --gpus --average --gselect --lattices --old-acoustic-scale --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --use-gpu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gpus)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --average)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gselect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --lattices)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --old-acoustic-scale)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__score__subcmd__htk)
            opts="-h --verbose --print-args --config --use-gpu --threads --htk-in --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --use-gpu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --htk-in)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__shims)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__sum__subcmd__accs)
            opts="-h --verbose --print-args --config --binary --kaldi-tool --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --binary)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kaldi-tool)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        amtool__subcmd__ubm__subcmd__map)
            opts="-h --verbose --print-args --config --use-gpu --threads --spk2utt --relevance --update-flags --supervector --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --verbose)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --print-args)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --use-gpu)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spk2utt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --relevance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --update-flags)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --supervector)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _amtool -o nosort -o bashdefault -o default amtool
else
    complete -F _amtool -o bashdefault -o default amtool
fi
